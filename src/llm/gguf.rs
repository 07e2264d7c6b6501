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

/// The four bytes every GGUF file starts with.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// A memory-mapped GGUF file with its parsed header.
pub struct GgufFile {
    path: PathBuf,
    /// Shared with tables left in the file ([`GgufFile::mapped_rows`]), which keep it mapped after loading.
    mmap: Arc<Mmap>,
    /// Metadata and tensor directory as parsed by candle.
    pub content: gguf_file::Content,
}

impl GgufFile {
    /// Maps the file and parses its header. Tensor data is not touched until [`GgufFile::tensor`].
    pub fn open(path: &Path) -> Result<Self, LoadError> {
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
        let content =
            std::panic::catch_unwind(AssertUnwindSafe(|| gguf_file::Content::read(&mut Cursor::new(&mmap[..]))))
                .map_err(|panic| {
                    bad_header(format!("the header reader gave up: {}", crate::panics::panic_text(&*panic)))
                })?
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
        Ok(Self { path: path.to_path_buf(), mmap, content })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole mapped file.
    pub fn bytes(&self) -> &[u8] {
        &self.mmap
    }

    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.mmap.len() as u64
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
            .ok_or_else(|| LoadError::MissingKey { path: self.path.clone(), key: key.to_string() })
    }

    fn wrong_type(&self, key: &str, expected: &'static str) -> LoadError {
        LoadError::WrongKeyType { path: self.path.clone(), key: key.to_string(), expected }
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
        let (dtype, dims, range) = self.tensor_range(name)?;
        let tensor = ggml_file::qtensor_from_ggml(dtype, &self.mmap[range.clone()], dims, device)
            .map_err(|e| self.bad_tensor(name, e.to_string()))?;
        self.release(range);
        Ok(tensor)
    }

    /// `read(type, [rows, cols], bytes)` over a matrix's bytes in the mapped file, which are dropped from memory
    /// afterwards, as after [`GgufFile::tensor`]: for a reader that builds its own layout straight from the file.
    pub fn read_matrix<T>(
        &self,
        name: &str,
        read: impl FnOnce(GgmlDType, [usize; 2], &[u8]) -> T,
    ) -> Result<T, LoadError> {
        let (dtype, dims, range) = self.tensor_range(name)?;
        let [rows, cols] = dims[..] else {
            return Err(self.bad_tensor(name, format!("{} dimensions, expected a matrix", dims.len())));
        };
        let value = read(dtype, [rows, cols], &self.mmap[range.clone()]);
        self.release(range);
        Ok(value)
    }

    /// A matrix left in the mapped file, read row by row on demand (see [`MappedRows`]).
    pub fn mapped_rows(&self, name: &str) -> Result<MappedRows, LoadError> {
        let (dtype, dims, range) = self.tensor_range(name)?;
        let [rows, cols] = dims[..] else {
            return Err(self.bad_tensor(name, format!("{} dimensions, expected a matrix", dims.len())));
        };
        MappedRows::new(Arc::clone(&self.mmap), range, dtype, rows, cols)
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
        let mut bytes = Vec::with_capacity(parts.iter().map(|(_, _, r)| r.len()).sum());
        for (_, _, range) in &parts {
            bytes.extend_from_slice(&self.mmap[range.clone()]);
        }
        let tensor = ggml_file::qtensor_from_ggml(*dtype, &bytes, vec![rows, first_dims[1]], device)
            .map_err(|e| self.bad_tensor(names[0], e.to_string()))?;
        for (_, _, range) in parts {
            self.release(range);
        }
        Ok(Some(tensor))
    }

    /// A tensor's type and dimensions (`[rows, cols]` for a matrix), without reading it.
    pub fn tensor_layout(&self, name: &str) -> Result<(GgmlDType, Vec<usize>), LoadError> {
        self.tensor_range(name).map(|(dtype, dims, _)| (dtype, dims))
    }

    /// A tensor's type, dimensions (as stored: `[rows, cols]` for a matrix) and byte range in the file, after
    /// checking that whole blocks fill it and that it lies inside the file.
    fn tensor_range(&self, name: &str) -> Result<(GgmlDType, Vec<usize>, std::ops::Range<usize>), LoadError> {
        let info = self
            .content
            .tensor_infos
            .get(name)
            .ok_or_else(|| LoadError::MissingTensor { path: self.path.clone(), name: name.to_string() })?;
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
        let start = self.content.tensor_data_offset.saturating_add(info.offset);
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
        if end > self.file_size() {
            return Err(LoadError::Truncated {
                path: self.path.clone(),
                name: name.to_string(),
                end,
                file_size: self.file_size(),
            });
        }
        Ok((dtype, dims.to_vec(), start as usize..end as usize))
    }

    fn bad_tensor(&self, name: &str, message: String) -> LoadError {
        LoadError::BadTensor { path: self.path.clone(), name: name.to_string(), message }
    }

    /// The bytes now live in a tensor: drop the mapped pages so peak memory stays near one copy of the model
    /// rather than two (mapped file pages count towards RSS).
    fn release(&self, range: std::ops::Range<usize>) {
        #[cfg(unix)]
        // SAFETY: `range` lies inside the map (`tensor_range` checked it) and the callers copied its bytes out
        // first. Whole pages are dropped, which may include the edges of neighbouring tensors that are still
        // borrowed (`MappedRows`); that is sound because the map is a read-only private file mapping with no
        // modified pages, so a later read faults the very same bytes back in from the (unchanged) file.
        unsafe {
            let _ = self.mmap.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len());
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
