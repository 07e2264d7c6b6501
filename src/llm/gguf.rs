//! A GGUF file opened for loading: memory-mapped, header checked, metadata and tensors read with errors that name
//! the file, the key or the tensor.

use std::fs::File;
use std::io::Cursor;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::{ggml_file, gguf_file, GgmlDType, QTensor};
use candle_core::Device;
use memmap2::Mmap;

pub use super::load_error::LoadError;
use super::mapped_rows::MappedRows;
use crate::store::split;

type ByteRange = std::ops::Range<usize>;

/// Where a tensor lies: its type, dimensions as stored, part and byte range in that part's file.
type TensorPlace = (GgmlDType, Vec<usize>, (usize, ByteRange));

/// The four bytes every GGUF file starts with.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// A memory-mapped GGUF file with its parsed header; a model split over several files (`split.count`, as
/// llama.cpp's `gguf-split` writes them: `NAME-00001-of-00003.gguf` …) is all of them, read as one.
pub struct GgufFile {
    /// The mapped files: one, or each part of a split model in order (the first is the file's path).
    parts: Vec<Part>,
    /// Which part holds each tensor (absent: the first).
    part_of: std::collections::HashMap<String, usize>,
    /// Metadata (the first part's) and the tensor directory of all parts, as parsed by candle; a tensor's offset
    /// is within its part's data.
    pub content: gguf_file::Content,
}

/// One mapped file of a model.
struct Part {
    path: PathBuf,
    /// Shared with tables left in the file ([`GgufFile::mapped_rows`]), which keep it mapped after loading.
    mmap: Arc<Mmap>,
    /// Where the part's tensor data starts.
    data_offset: u64,
}

/// Maps one GGUF file and parses its header.
fn map_and_read(path: &Path) -> Result<(Arc<Mmap>, gguf_file::Content), LoadError> {
    let open_err = |source| LoadError::Open { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(open_err)?;
    // SAFETY: `Mmap` maps the file read-only and private, and we only ever read it. What memmap2 cannot rule
    // out is another process changing the file while it is mapped; the store never does (it writes a
    // temporary file and renames it into place, and an unlinked or replaced file keeps the old pages), and a
    // model file given by path is, as for any loader that maps weights, required to stay unchanged while
    // loaded.
    let mmap = Arc::new(unsafe { Mmap::map(&file) }.map_err(open_err)?);
    // Tensors are read front to back once: ask for aggressive read-ahead.
    #[cfg(unix)]
    let _ = mmap.advise(memmap2::Advice::Sequential);
    if mmap.len() < 4 || &mmap[..4] != GGUF_MAGIC {
        let found = String::from_utf8_lossy(&mmap[..mmap.len().min(4)]).into_owned();
        return Err(LoadError::BadMagic { path: path.to_path_buf(), found });
    }
    let bad_header = |message| LoadError::BadHeader { path: path.to_path_buf(), message };
    // candle's reader panics on some malformed headers (a `general.alignment` of 0 divides by zero, found by
    // the gguf fuzz target): that is a bad header as well, not a crash.
    let content = std::panic::catch_unwind(AssertUnwindSafe(|| gguf_file::Content::read(&mut Cursor::new(&mmap[..]))))
        .map_err(|panic| bad_header(format!("the header reader gave up: {}", crate::panics::panic_text(&*panic))))?
        .map_err(|e| match super::gguf_types::first_unreadable(&mmap) {
            // candle names a type it does not read by number only: say which tensor, and its name.
            Some((tensor, number)) => LoadError::UnsupportedTensorType {
                path: path.to_path_buf(),
                tensor,
                type_name: super::gguf_types::type_name(number),
                number,
            },
            None => bad_header(e.to_string()),
        })?;
    Ok((mmap, content))
}

/// A split model's part numbers from its header: `(split.no, split.count)`; `None` for a whole file.
fn split_of(content: &gguf_file::Content) -> Option<(usize, usize)> {
    let number =
        |key: &str| content.metadata.get(key).and_then(|v| v.to_u16().ok().or(v.to_u32().ok().map(|n| n as u16)));
    match (number("split.no"), number("split.count")) {
        (Some(no), Some(count)) if count > 1 => Some((no as usize, count as usize)),
        (None, Some(count)) if count > 1 => Some((0, count as usize)),
        _ => None,
    }
}

/// The path of part `index` (from 0) of `count`, beside `given`, which is part `given_index` and named as
/// llama.cpp's `gguf-split` names parts (`NAME-00002-of-00003.gguf`).
fn part_path(given: &Path, given_index: usize, count: usize, index: usize) -> Result<PathBuf, LoadError> {
    let name = given.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    match split::parse(name) {
        Some(split) if split.part == given_index + 1 && split.count == count => {
            Ok(given.with_file_name(split.sibling(index + 1)))
        }
        _ => Err(LoadError::BadHeader {
            path: given.to_path_buf(),
            message: format!(
                "it is part {} of a model split over {count} files, and its name does not end `{}`: keep the \
                 parts' names as gguf-split wrote them, so that the others can be found beside it",
                given_index + 1,
                split::part_name("", given_index + 1, count)
            ),
        }),
    }
}

impl GgufFile {
    /// Maps the file and parses its header; for a part of a split model, every part (the first one's metadata,
    /// whichever part is given). Tensor data is not touched until [`GgufFile::tensor`].
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let (mmap, content) = map_and_read(path)?;
        let Some((given_index, count)) = split_of(&content) else {
            let data_offset = content.tensor_data_offset;
            let parts = vec![Part { path: path.to_path_buf(), mmap, data_offset }];
            return Ok(Self { parts, part_of: Default::default(), content });
        };
        let mut given = Some((mmap, content));
        let mut parts = Vec::with_capacity(count);
        let mut part_of = std::collections::HashMap::new();
        let mut first: Option<gguf_file::Content> = None;
        for index in 0..count {
            let part = part_path(path, given_index, count, index)?;
            let (mmap, content) = match index == given_index {
                true => given.take().expect("the given part is read once"),
                false => map_and_read(&part).map_err(|e| match e {
                    LoadError::Open { path: missing, source } if source.kind() == std::io::ErrorKind::NotFound => {
                        LoadError::BadHeader {
                            path: path.to_path_buf(),
                            message: format!(
                                "it is part {} of a model split over {count} files, and part {} ({}) is not beside \
                                 it: download every part into the same folder",
                                given_index + 1,
                                index + 1,
                                missing.display()
                            ),
                        }
                    }
                    other => other,
                })?,
            };
            if split_of(&content).is_none_or(|(no, of)| no != index || of != count) {
                return Err(LoadError::BadHeader {
                    path: part,
                    message: format!("its split.no/split.count do not say part {} of {count}", index + 1),
                });
            }
            for name in content.tensor_infos.keys() {
                if part_of.insert(name.clone(), index).is_some() {
                    return Err(LoadError::BadHeader {
                        path: part.clone(),
                        message: format!("tensor {name} is in two parts of the split model"),
                    });
                }
            }
            parts.push(Part { path: part, mmap, data_offset: content.tensor_data_offset });
            match &mut first {
                None => first = Some(content),
                Some(first) => first.tensor_infos.extend(content.tensor_infos),
            }
        }
        let content = first.expect("a split model has parts");
        Ok(Self { parts, part_of, content })
    }

    /// The file's path (a split model's first part).
    pub fn path(&self) -> &Path {
        &self.parts[0].path
    }

    /// Size of the file in bytes (of all its parts).
    pub fn file_size(&self) -> u64 {
        self.parts.iter().map(|p| p.mmap.len() as u64).sum()
    }

    /// How many files the model is split over (1: a whole file).
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// Frees the tokenizer's arrays (token texts, merges, types, scores: about 30 MiB of small allocations for a
    /// 151,936-token vocabulary) once the tokenizer and chat template are built from them; nothing after reads
    /// them, and the weights' conversion would otherwise hold them through the load's peak.
    pub fn forget_tokenizer_arrays(&mut self) {
        self.content
            .metadata
            .retain(|key, value| !(key.starts_with("tokenizer.ggml.") && matches!(value, gguf_file::Value::Array(_))));
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str, LoadError> {
        self.string("general.architecture")
    }

    fn value(&self, key: &str) -> Result<&gguf_file::Value, LoadError> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| LoadError::MissingKey { path: self.path().to_path_buf(), key: key.to_string() })
    }

    fn wrong_type(&self, key: &str, expected: &'static str) -> LoadError {
        LoadError::WrongKeyType { path: self.path().to_path_buf(), key: key.to_string(), expected }
    }

    /// A string metadata value.
    pub fn string(&self, key: &str) -> Result<&str, LoadError> {
        match self.value(key)? {
            gguf_file::Value::String(s) => Ok(s),
            _ => Err(self.wrong_type(key, "a string")),
        }
    }

    /// An unsigned integer metadata value (any integer width).
    pub fn usize(&self, key: &str) -> Result<usize, LoadError> {
        let value = self.value(key)?;
        value
            .to_u64()
            .or_else(|_| value.to_u32().map(u64::from))
            .or_else(|_| value.to_i32().map(|v| v.max(0) as u64))
            .map(|v| v as usize)
            .map_err(|_| self.wrong_type(key, "an integer"))
    }

    /// A float metadata value.
    pub fn f32(&self, key: &str) -> Result<f32, LoadError> {
        let value = self.value(key)?;
        value.to_f32().or_else(|_| value.to_f64().map(|v| v as f32)).map_err(|_| self.wrong_type(key, "a float"))
    }

    /// Whether the file has a tensor of this name.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// Reads one tensor straight from the mapped file (one copy into candle's block storage,
    /// no intermediate buffer), after checking that it lies inside the file.
    pub fn tensor(&self, name: &str, device: &Device) -> Result<QTensor, LoadError> {
        let (dtype, dims, (part, range)) = self.tensor_range(name)?;
        let tensor = ggml_file::qtensor_from_ggml(dtype, &self.parts[part].mmap[range.clone()], dims, device)
            .map_err(|e| self.bad_tensor(name, e.to_string()))?;
        self.release(part, range);
        Ok(tensor)
    }

    /// `read(type, [rows, cols], bytes)` over a matrix's bytes in the mapped file, which are dropped from memory
    /// afterwards, as after [`GgufFile::tensor`]: for a reader that builds its own layout straight from the file.
    pub fn read_matrix<T>(
        &self,
        name: &str,
        read: impl FnOnce(GgmlDType, [usize; 2], &[u8]) -> T,
    ) -> Result<T, LoadError> {
        let (dtype, dims, (part, range)) = self.tensor_range(name)?;
        let [rows, cols] = dims[..] else {
            return Err(self.bad_tensor(name, format!("{} dimensions, expected a matrix", dims.len())));
        };
        let value = read(dtype, [rows, cols], &self.parts[part].mmap[range.clone()]);
        self.release(part, range);
        Ok(value)
    }

    /// A matrix left in the mapped file, read row by row on demand (see [`MappedRows`]).
    pub fn mapped_rows(&self, name: &str) -> Result<MappedRows, LoadError> {
        let (dtype, dims, (part, range)) = self.tensor_range(name)?;
        let [rows, cols] = dims[..] else {
            return Err(self.bad_tensor(name, format!("{} dimensions, expected a matrix", dims.len())));
        };
        MappedRows::new(Arc::clone(&self.parts[part].mmap), range, dtype, rows, cols)
            .ok_or_else(|| self.bad_tensor(name, format!("rows of {cols} values are not whole {dtype:?} blocks")))
    }

    /// Matrices with the same type and width stacked along their rows as one tensor (`[Σ rows, cols]`), so one
    /// matmul computes all of them (the query, key and value projections read the same input). `None` when the
    /// types or widths differ. Quantized rows are whole blocks, so stacking is concatenating their bytes.
    pub fn stacked_rows(&self, names: &[&str], device: &Device) -> Result<Option<QTensor>, LoadError> {
        let parts = names.iter().map(|name| self.tensor_range(name)).collect::<Result<Vec<_>, _>>()?;
        let Some((dtype, first_dims, _)) = parts.first() else { return Ok(None) };
        let same = parts.iter().all(|(t, dims, _)| t == dtype && dims.len() == 2 && dims[1] == first_dims[1]);
        if !same || first_dims.len() != 2 {
            return Ok(None);
        }
        let rows: usize = parts.iter().map(|(_, dims, _)| dims[0]).sum();
        let mut bytes = Vec::with_capacity(parts.iter().map(|(_, _, (_, r))| r.len()).sum());
        for (_, _, (part, range)) in &parts {
            bytes.extend_from_slice(&self.parts[*part].mmap[range.clone()]);
        }
        let tensor = ggml_file::qtensor_from_ggml(*dtype, &bytes, vec![rows, first_dims[1]], device)
            .map_err(|e| self.bad_tensor(names[0], e.to_string()))?;
        for (_, _, (part, range)) in parts {
            self.release(part, range);
        }
        Ok(Some(tensor))
    }

    /// A tensor's type and dimensions (`[rows, cols]` for a matrix), without reading it.
    pub fn tensor_layout(&self, name: &str) -> Result<(GgmlDType, Vec<usize>), LoadError> {
        self.tensor_range(name).map(|(dtype, dims, _)| (dtype, dims))
    }

    /// A tensor's type, dimensions (as stored: `[rows, cols]` for a matrix), part and byte range in that part's
    /// file, after checking that whole blocks fill it and that it lies inside the file.
    fn tensor_range(&self, name: &str) -> Result<TensorPlace, LoadError> {
        let info = self
            .content
            .tensor_infos
            .get(name)
            .ok_or_else(|| LoadError::MissingTensor { path: self.path().to_path_buf(), name: name.to_string() })?;
        let dtype = info.ggml_dtype;
        // The dimensions are the file's word: their product (candle's `elem_count`) can overflow, which panicked
        // with overflow checks and wrapped to a small size without them, passing the bounds check below
        // (found by the `gguf` fuzz target). Checked products make it an error naming the tensor.
        let dims = info.shape.dims();
        let too_big =
            || self.bad_tensor(name, format!("dimensions {dims:?} multiply to more elements than fit in memory"));
        let elems = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(too_big)?;
        if elems % dtype.block_size() != 0 {
            return Err(self.bad_tensor(name, format!("{elems} elements do not fill whole {dtype:?} blocks")));
        }
        let size = (elems / dtype.block_size()).checked_mul(dtype.type_size()).ok_or_else(too_big)? as u64;
        let part = self.part_of.get(name).copied().unwrap_or(0);
        let (path, file_size) = (&self.parts[part].path, self.parts[part].mmap.len() as u64);
        let start = self.parts[part].data_offset.saturating_add(info.offset);
        // candle reads the bytes in place as the type's blocks (`slice::from_raw_parts`), which needs them aligned;
        // the map starts on a page, so a tensor starting off an 8-byte boundary in the file (GGUF requires multiples
        // of its alignment, itself a multiple of 8) would be read unaligned: undefined behaviour (found by the
        // `gguf` fuzz target).
        if start % 8 != 0 {
            return Err(
                self.bad_tensor(name, format!("its data starts at byte {start}, not a multiple of 8 as GGUF requires"))
            );
        }
        let end = start.saturating_add(size);
        if end > file_size {
            return Err(LoadError::Truncated { path: path.clone(), name: name.to_string(), end, file_size });
        }
        Ok((dtype, dims.to_vec(), (part, start as usize..end as usize)))
    }

    fn bad_tensor(&self, name: &str, message: String) -> LoadError {
        LoadError::BadTensor { path: self.path().to_path_buf(), name: name.to_string(), message }
    }

    /// The bytes now live in a tensor: drop the mapped pages so peak memory stays near one copy of the model
    /// rather than two (mapped file pages count towards RSS).
    fn release(&self, part: usize, range: ByteRange) {
        #[cfg(unix)]
        // SAFETY: `range` lies inside the map (`tensor_range` checked it) and the callers copied its bytes out
        // first. Whole pages are dropped, which may include the edges of neighbouring tensors that are still
        // borrowed (`MappedRows`); that is sound because the map is a read-only private file mapping with no
        // modified pages, so a later read faults the very same bytes back in from the (unchanged) file.
        unsafe {
            let mmap = &self.parts[part].mmap;
            let _ = mmap.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::gguf_types::tests::header_with;

    #[test]
    fn opening_a_file_with_a_type_candle_does_not_read_names_the_tensor_its_type_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.gguf");
        std::fs::write(&path, header_with(&[("token_embd.weight", 12), ("blk.0.ffn_down.weight", 23)])).unwrap();
        let error = GgufFile::open(&path).err().expect("an IQ4_XS tensor is refused").to_string();
        for part in ["model.gguf", "'blk.0.ffn_down.weight'", "IQ4_XS (ggml type 23)", "Q4_K_M", "llama-quantize"] {
            assert!(error.contains(part), "{part:?} missing from: {error}");
        }
    }
}
