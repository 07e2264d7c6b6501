//! Stand-ins for `gpu.rs` without CUDA: passes never take our GPU kernels, so these are never used.

use candle_core::{Device, Tensor};

use super::Decoder;
use crate::llm::SequencePass;
use crate::Result;

/// Without CUDA there is never a pass table (see `kernels::gpu_attention`).
pub(super) enum PassTable {}

impl PassTable {
    pub(super) fn attend(&self, _: usize, _: &Tensor, _: &Tensor, _: &Tensor, _: f32) -> Result<Tensor> {
        match *self {}
    }
}

/// Which of our GPU kernels the model's passes on `device` take: none without CUDA.
pub(super) fn ours_on_gpu(_: &Device) -> (bool, bool) {
    (false, false)
}

/// Without CUDA there is no fused step: not used (`ours_on_gpu` never says so).
pub(super) fn add_rms_norm(_: &Tensor, _: &Tensor, _: &Tensor, _: f32) -> Result<Option<(Tensor, Tensor)>> {
    Ok(None)
}

/// Without CUDA there is no fused step: not used (`ours_on_gpu` never says so).
pub(super) fn silu_mul(_: &Tensor, _: &Tensor) -> Result<Option<Tensor>> {
    Ok(None)
}

impl Decoder {
    /// Without CUDA, passes never take the GPU's pass attention (`gpu_attention` is always false).
    pub(super) fn gpu_pass_table(&mut self, _: &[SequencePass<'_>]) -> Result<Option<PassTable>> {
        let _ = self.gpu_attention;
        Ok(None)
    }
}
