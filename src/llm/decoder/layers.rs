//! The model's building blocks: a layer's weights, stacked projections, the token table, and the residual-stream
//! steps (add and norm, the gated activation) that run on our fused GPU kernels where they can.

use candle_core::{Module, Tensor, D};

use super::family::Activation;
use super::gpu;
use crate::kernels::QLinear;
use crate::llm::mapped_rows::MappedRows;
use crate::Result;

/// `x += delta` (when there is one), then `x`'s RMS norm scaled by `weight`: with `ours`, one launch on the GPU.
pub(super) fn add_and_norm(
    x: &mut Tensor,
    delta: Option<Tensor>,
    weight: &Tensor,
    eps: f32,
    ours: bool,
) -> Result<Tensor> {
    if let (true, Some(delta)) = (ours, &delta) {
        if let Some((sum, normed)) = gpu::add_rms_norm(x, delta, weight, eps)? {
            *x = sum;
            return Ok(normed);
        }
    }
    if let Some(delta) = delta {
        *x = (&*x + delta)?;
    }
    Ok(candle_nn::ops::rms_norm(x, weight, eps)?)
}

/// `silu(gate) * up`: with `ours`, one launch on the GPU; on the CPU, one op on the CPU pool.
fn gated_silu(gate: &Tensor, up: &Tensor, ours: bool) -> Result<Tensor> {
    if ours {
        if let Some(product) = gpu::silu_mul(gate, up)? {
            return Ok(product);
        }
    }
    if gate.device().is_cpu() && gate.dtype() == candle_core::DType::F32 {
        // On the CPU pool rather than candle's one thread; the same bits.
        return crate::kernels::silu_mul::silu_mul(gate, up);
    }
    Ok((candle_nn::ops::silu(gate)? * up)?)
}

/// One layer's weights. Which of the optional ones a layer has is the file's to say (a tensor present or not).
pub(super) struct Layer {
    pub(super) attn_norm: Tensor,
    /// The query, key and value projections (with their biases where the file has them), stacked where their types
    /// allow, or one fused matrix split by width (Phi-3).
    pub(super) qkv: StackedLinear,
    /// RMS norms over each query and key head before RoPE (Qwen3, Gemma 3).
    pub(super) q_norm: Option<Tensor>,
    pub(super) k_norm: Option<Tensor>,
    pub(super) wo: QLinear,
    /// An RMS norm on the attention block's output before it joins the residual stream (Gemma 3).
    pub(super) attn_post_norm: Option<Tensor>,
    pub(super) ffn_norm: Tensor,
    /// The gate and up projections, stacked where their types allow, or one fused matrix (Phi-3).
    pub(super) gate_up: StackedLinear,
    pub(super) down: QLinear,
    /// An RMS norm on the feed-forward block's output (Gemma 3).
    pub(super) ffn_post_norm: Option<Tensor>,
}

impl Layer {
    /// The feed-forward block's output for its normed input `h`: the gated activation, then the down projection
    /// (and its post-norm, where the layer has one).
    pub(super) fn feed_forward(&self, h: &Tensor, activation: Activation, eps: f32, ours: bool) -> Result<Tensor> {
        let [gate, up]: [Tensor; 2] = self.gate_up.forward(h)?.try_into().map_err(|_| parts_error("gate/up"))?;
        let gated = match activation {
            Activation::Silu => gated_silu(&gate, &up, ours)?,
            Activation::GeluTanh => (gate.gelu()? * up)?,
        };
        let out = self.down.forward(&gated)?;
        Ok(match &self.ffn_post_norm {
            Some(norm) => candle_nn::ops::rms_norm(&out, norm, eps)?,
            None => out,
        })
    }
}

/// Linear layers that read the same input; on a GPU, consecutive ones of the same type and width are stacked into
/// one matrix, so one matmul's launches replace several. Each output row is computed exactly as the separate
/// layer would, so results do not change. A file's fused matrix (Phi-3's `attn_qkv`, `ffn_up`) is one group of
/// several parts from the start.
pub(super) struct StackedLinear {
    /// Each group: the (stacked) layer, its bias (stacked likewise), and the output width of each part.
    pub(super) groups: Vec<(QLinear, Option<Tensor>, Vec<usize>)>,
}

impl StackedLinear {
    /// The layers, for load reports and checks.
    pub(super) fn linears(&self) -> impl Iterator<Item = &QLinear> {
        self.groups.iter().map(|(linear, _, _)| linear)
    }

    /// Every part's output `[.., width]`, in the order the parts were given.
    pub(super) fn forward(&self, x: &Tensor) -> Result<Vec<Tensor>> {
        let mut outputs = Vec::new();
        for (linear, bias, widths) in &self.groups {
            let mut y = linear.forward(x)?;
            if let Some(bias) = bias {
                y = y.broadcast_add(bias)?;
            }
            let mut offset = 0;
            for &width in widths {
                outputs.push(if widths.len() == 1 { y.clone() } else { y.narrow(D::Minus1, offset, width)? });
                offset += width;
            }
        }
        Ok(outputs)
    }
}

/// Where token embeddings are looked up.
pub(super) enum TokenTable {
    /// Rows read from the mapped file on demand: an untied table on the CPU.
    Mapped(MappedRows),
    /// A loaded matrix: tied to the output projection, or on a GPU.
    Loaded(QLinear),
}

impl TokenTable {
    /// Rows picked by `ids` as f32, shape `ids.dims() ++ [hidden]`.
    pub(super) fn lookup(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Self::Mapped(rows) => Ok(rows.lookup(ids)?),
            Self::Loaded(table) => table.embedding(ids),
        }
    }
}

/// A stacked projection returned another number of parts than the model has (a bug, not bad input).
pub(super) fn parts_error(what: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!("the {what} projection returned the wrong number of parts"))
}
