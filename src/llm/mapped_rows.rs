//! A quantized matrix left in the mapped model file and read row by row: the token embedding table, when the
//! model has a separate output projection.
//!
//! A lookup reads a few rows per token, so only the pages of rows a run has used become resident; copied into
//! the heap at load, the whole table was (the 0.5B's is 89 MiB of its 469 MiB file, and a prompt touches a few
//! hundred of its 151,936 rows). The values are the loaded table's: the same blocks dequantized by candle.

use std::ops::Range;
use std::sync::Arc;

use candle_core::quantized::{ggml_file, GgmlDType};
use candle_core::{Device, Tensor};
use memmap2::Mmap;

/// Rows `[rows, cols]` of one tensor in a mapped file.
pub struct MappedRows {
    map: Arc<Mmap>,
    /// The tensor's bytes in the file.
    range: Range<usize>,
    dtype: GgmlDType,
    rows: usize,
    cols: usize,
    /// Bytes of one row: `cols / block size` blocks.
    row_bytes: usize,
}

impl std::fmt::Debug for MappedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedRows")
            .field("dtype", &self.dtype)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish()
    }
}

impl MappedRows {
    /// The matrix in `map[range]`; `None` unless `range` holds exactly `rows` rows of whole `dtype` blocks.
    pub(crate) fn new(map: Arc<Mmap>, range: Range<usize>, dtype: GgmlDType, rows: usize, cols: usize) -> Option<Self> {
        let whole_blocks = cols.is_multiple_of(dtype.block_size());
        let row_bytes = cols / dtype.block_size() * dtype.type_size();
        if !whole_blocks || range.end > map.len() || range.len() != rows * row_bytes {
            return None;
        }
        // Lookups jump from row to row: no read-ahead of the pages around each (the file is mapped sequential
        // for loading).
        #[cfg(unix)]
        let _ = map.advise_range(memmap2::Advice::Random, range.start, range.len());
        Some(Self { map, range, dtype, rows, cols, row_bytes })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Rows picked by `ids` as f32, shape `ids.dims() ++ [cols]`, on `ids`' device.
    pub fn lookup(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        let picked = crate::kernels::embedding_ids(ids, self.rows)?;
        let row_bytes = self.row_bytes;
        let mut bytes = Vec::with_capacity(picked.len() * row_bytes);
        for &id in &picked {
            let start = self.range.start + id as usize * row_bytes;
            bytes.extend_from_slice(&self.map[start..start + row_bytes]);
        }
        let block = ggml_file::qtensor_from_ggml(self.dtype, &bytes, vec![picked.len(), self.cols], &Device::Cpu)?;
        let mut dims = ids.dims().to_vec();
        dims.push(self.cols);
        block.dequantize(&Device::Cpu)?.reshape(dims)?.to_device(ids.device())
    }
}
