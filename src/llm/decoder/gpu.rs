//! Everything of the model that needs CUDA: which of our GPU kernels its passes take, the fused elementwise
//! steps, and the table of caches the GPU's pass attention reads. `gpu_off.rs` stands in for it without CUDA.

use candle_core::{DType, Device, Tensor};

use super::Decoder;
use crate::kernels::gpu::{self, device_address};
pub(super) use crate::kernels::gpu_attention::PassTable;
use crate::kernels::gpu_attention::{self, PartCache};
use crate::kernels::gpu_fused;
use crate::llm::SequencePass;
use crate::Result;

/// Which of our GPU kernels the model's passes on `device` take (`kernels::gpu::Ours`): (pass attention, fused
/// elementwise steps).
pub(super) fn ours_on_gpu(device: &Device) -> (bool, bool) {
    let ours = gpu::Ours::on(device);
    (ours.attention, ours.fused)
}

/// `x + delta` and its RMS norm scaled by `weight`, in one launch on the GPU: (sum, normed).
pub(super) fn add_rms_norm(x: &Tensor, delta: &Tensor, weight: &Tensor, eps: f32) -> Result<Option<(Tensor, Tensor)>> {
    gpu_fused::add_rms_norm(x, delta, weight, eps).map(Some)
}

/// `silu(gate) * up` in one launch on the GPU.
pub(super) fn silu_mul(gate: &Tensor, up: &Tensor) -> Result<Option<Tensor>> {
    gpu_fused::silu_mul(gate, up).map(Some)
}

impl Decoder {
    /// For a pass the GPU's pass attention takes (`gpu_attention::takes`), on a device where it runs: cuts each part's
    /// caches back to its position, makes room for its new tokens in every layer and uploads where they live.
    pub(super) fn gpu_pass_table(&mut self, parts: &[SequencePass<'_>]) -> Result<Option<PassTable>> {
        let c = &self.config;
        if !self.gpu_attention
            || !gpu_attention::head_dim_fits(c.head_dim)
            || !gpu_attention::takes(parts.iter().map(|p| p.tokens.len()))
        {
            return Ok(None);
        }
        let (shape, context, device) = ((c.n_kv_head, c.head_dim), c.context_length, &self.device);
        let mut caches = vec![Vec::with_capacity(parts.len()); c.n_layer];
        for part in parts {
            let slots = self.sequences.get_mut(&part.sequence).expect("checked by check_parts");
            for (layer, cache) in caches.iter_mut().zip(&mut slots.active_mut().layers) {
                cache.truncate(part.pos);
                let (keys, values) = cache.reserve(part.pos + part.tokens.len(), shape, DType::F32, device, context)?;
                layer.push(PartCache {
                    keys: device_address(&keys)?,
                    values: device_address(&values)?,
                    capacity: keys.dim(2)?,
                    position: part.pos,
                });
            }
        }
        let rows: Vec<usize> = parts.iter().map(|p| p.tokens.len()).collect();
        Ok(Some(PassTable::upload(device, &caches, &rows)?))
    }
}
