//! Our CPU matmul kernels for quantized weights, chosen per weight matrix at load and per CPU feature at run time.
//!
//! candle 0.11's CPU path runs Q8_0 weights through one dot product per (row, column) pair unless the width is a
//! multiple of 256 and the CPU has AVX-512 VNNI; the 0.5B executor (width 896, Q5_0/Q8_0 tensors) never gets
//! there, so its prefill ran at a third of llama.cpp's. `QLinear` wraps a weight matrix: our tiled Q8_0 kernel
//! where it applies (x86-64 with AVX2 + FMA), candle's `QMatMul` everywhere else (other types, GPUs, other
//! CPUs). Every fast path has a test against the scalar reference in `q8_0`.

pub mod q8_0;
#[cfg(target_arch = "x86_64")]
mod q8_0_avx2;

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{CpuStorage, CustomOp1, Layout, Module, Shape, Tensor};

pub use q8_0::Q8_0Matrix;

use crate::Result;

/// The instruction sets our kernels can use on this CPU, detected once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuLevel {
    /// x86-64 with AVX2 and FMA: our tiled kernels run.
    Avx2,
    /// Anything else: candle's kernels run.
    Portable,
}

/// What this CPU supports (`TANDEM_KERNELS=candle` forces `Portable`, to compare against candle's kernels).
pub fn cpu_level() -> CpuLevel {
    static LEVEL: std::sync::OnceLock<CpuLevel> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        if std::env::var("TANDEM_KERNELS").is_ok_and(|v| v == "candle") {
            return CpuLevel::Portable;
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return CpuLevel::Avx2;
        }
        CpuLevel::Portable
    })
}

/// A linear layer without bias, `y = x Wᵀ`, over a quantized weight `W` of shape `[out, in]`.
#[derive(Clone)]
pub enum QLinear {
    /// candle's quantized matmul (any type, any device).
    Candle(QMatMul),
    /// Our tiled Q8_0 kernel (CPU).
    Q8_0(Arc<Q8_0Matrix>),
}

impl QLinear {
    /// Wraps `weight`, taking our kernel when the device is the CPU, the CPU has one, and the type is Q8_0.
    pub fn new(weight: QTensor) -> Result<Self> {
        if weight.device().is_cpu() && weight.dtype() == GgmlDType::Q8_0 && cpu_level() == CpuLevel::Avx2 {
            return Ok(Self::Q8_0(Arc::new(Q8_0Matrix::from_qtensor(&weight)?)));
        }
        Ok(Self::Candle(QMatMul::from_qtensor(weight)?))
    }

    /// Like `new`, and Q5_0 weights (which candle's CPU kernels run slowly) widen exactly to our int8 layout.
    /// `None` when this CPU has no kernel of ours for the type: the caller picks another route.
    pub fn widened(weight: &QTensor) -> Result<Option<Self>> {
        if !weight.device().is_cpu() || cpu_level() != CpuLevel::Avx2 {
            return Ok(None);
        }
        Ok(match weight.dtype() {
            GgmlDType::Q8_0 => Some(Self::Q8_0(Arc::new(Q8_0Matrix::from_qtensor(weight)?))),
            GgmlDType::Q5_0 => Some(Self::Q8_0(Arc::new(Q8_0Matrix::from_q5_0(weight)?))),
            _ => None,
        })
    }

    /// Like `new` for a weight shared with another use (the embedding table tied to the output projection).
    pub fn from_arc(weight: Arc<QTensor>) -> Result<Self> {
        if weight.device().is_cpu() && weight.dtype() == GgmlDType::Q8_0 && cpu_level() == CpuLevel::Avx2 {
            return Ok(Self::Q8_0(Arc::new(Q8_0Matrix::from_qtensor(&weight)?)));
        }
        Ok(Self::Candle(QMatMul::from_arc(weight)?))
    }

    /// Rows of the weight picked by `ids` as f32, shape `ids.dims() ++ [in]`: the embedding lookup, so a table
    /// tied to the output projection is stored once.
    pub fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Self::Candle(m) => Ok(m.embedding(ids)?),
            Self::Q8_0(w) => {
                let picked = ids.flatten_all()?.to_dtype(candle_core::DType::U32)?.to_vec1::<u32>()?;
                let values = w.dequantize_rows(&picked)?;
                let mut dims = ids.dims().to_vec();
                dims.push(w.cols());
                Ok(Tensor::from_vec(values, dims, ids.device())?)
            }
        }
    }

    /// Which kernel runs this layer, for load reports.
    pub fn kernel_name(&self) -> &'static str {
        match self {
            Self::Candle(_) => "candle",
            Self::Q8_0(_) => "tandem-q8_0",
        }
    }
}

impl Module for QLinear {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Candle(m) => m.forward(xs),
            Self::Q8_0(w) => xs.contiguous()?.apply_op1_no_bwd(&Q8_0Op(w.clone())),
        }
    }
}

/// The candle op that runs `Q8_0Matrix::matmul` on a CPU tensor `[..., in]` → `[..., out]`.
struct Q8_0Op(Arc<Q8_0Matrix>);

impl CustomOp1 for Q8_0Op {
    fn name(&self) -> &'static str {
        "tandem-q8_0-matmul"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let weight = &self.0;
        let dims = layout.shape().dims();
        let Some((&k, batch)) = dims.split_last() else { candle_core::bail!("tandem-q8_0-matmul: a scalar input") };
        if k != weight.cols() {
            candle_core::bail!("tandem-q8_0-matmul: input width {k}, weight is {}x{}", weight.rows(), weight.cols())
        }
        let Some(offsets) = layout.contiguous_offsets() else {
            candle_core::bail!("tandem-q8_0-matmul: input is not contiguous")
        };
        let input = match storage {
            CpuStorage::F32(values) => &values[offsets.0..offsets.1],
            other => {
                use candle_core::backend::BackendStorage;
                candle_core::bail!("tandem-q8_0-matmul: input is {:?}, expected f32", other.dtype())
            }
        };
        let m = input.len() / k;
        let mut out = vec![0f32; m * weight.rows()];
        weight.matmul(input, m, &mut out);
        let mut out_dims = batch.to_vec();
        out_dims.push(weight.rows());
        Ok((CpuStorage::F32(out), Shape::from(out_dims)))
    }
}
