//! `silu(gate) · up` for CPU tensors in one op on the CPU pool: candle's SiLU runs on one thread, and a prefill's
//! feed-forward activations (128 rows × 8,960 a slice on the 1.5B) kept the other core waiting while it did.
//!
//! Each value is candle's own arithmetic, `g / (1 + exp(−g))` and then `· u`, so the results are the same bits
//! as `silu(gate)? * up`; only the threads and the one intermediate tensor fewer differ.

use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};

use crate::Result;

/// Values one pool work item covers: enough that handing out items costs nothing next to the exponentials.
const CHUNK: usize = 4096;

/// `silu(gate) · up`, elementwise, for f32 tensors of one shape on the CPU.
pub fn silu_mul(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    Ok(gate.contiguous()?.apply_op2_no_bwd(&up.contiguous()?, &SiluMul)?)
}

/// One value: candle's `Silu::f32`, then the product.
#[inline(always)]
fn silu_times(g: f32, u: f32) -> f32 {
    g / (1.0 + (-g).exp()) * u
}

struct SiluMul;

impl CustomOp2 for SiluMul {
    fn name(&self) -> &'static str {
        "silu-mul"
    }

    fn cpu_fwd(
        &self,
        gate: &CpuStorage,
        gate_layout: &Layout,
        up: &CpuStorage,
        up_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        if gate_layout.shape() != up_layout.shape() {
            candle_core::bail!(
                "silu-mul: gate {:?} and up {:?} differ in shape",
                gate_layout.shape(),
                up_layout.shape()
            )
        }
        let (Some(gate_at), Some(up_at)) = (gate_layout.contiguous_offsets(), up_layout.contiguous_offsets()) else {
            candle_core::bail!("silu-mul: inputs must be contiguous")
        };
        let (CpuStorage::F32(gate), CpuStorage::F32(up)) = (gate, up) else {
            candle_core::bail!("silu-mul takes f32 tensors")
        };
        let (gate, up) = (&gate[gate_at.0..gate_at.1], &up[up_at.0..up_at.1]);
        let mut out = vec![0f32; gate.len()];
        super::for_chunks_mut(&mut out, CHUNK, |start, part| {
            for ((o, &g), &u) in part.iter_mut().zip(&gate[start..]).zip(&up[start..]) {
                *o = silu_times(g, u);
            }
        });
        Ok((CpuStorage::F32(out), gate_layout.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    #[test]
    fn the_same_bits_as_candles_silu_then_product() {
        // Values across SiLU's range, including where exp(−g) overflows or underflows, over several chunks.
        let n = 3 * super::CHUNK + 77;
        let gate: Vec<f32> = (0..n).map(|i| ((i * 7919) % 2001) as f32 / 10.0 - 100.0).collect();
        let up: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 997) as f32 / 97.0 - 5.0).collect();
        let gate = Tensor::from_vec(gate, n, &Device::Cpu).unwrap();
        let up = Tensor::from_vec(up, n, &Device::Cpu).unwrap();
        let ours: Vec<f32> = super::silu_mul(&gate, &up).unwrap().to_vec1().unwrap();
        let candle: Vec<f32> = (candle_nn::ops::silu(&gate).unwrap() * &up).unwrap().to_vec1().unwrap();
        assert_eq!(ours.len(), n);
        for (i, (a, b)) in ours.iter().zip(&candle).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "value {i}: {a} against candle's {b}");
        }
    }

    #[test]
    fn strided_inputs_are_read_in_order_and_shapes_must_agree() {
        let both = Tensor::arange(0f32, 24.0, &Device::Cpu).unwrap().reshape((4, 6)).unwrap();
        let (gate, up) = (both.narrow(1, 0, 3).unwrap(), both.narrow(1, 3, 3).unwrap());
        let ours: Vec<Vec<f32>> = super::silu_mul(&gate, &up).unwrap().to_vec2().unwrap();
        let candle: Vec<Vec<f32>> = (candle_nn::ops::silu(&gate).unwrap() * &up).unwrap().to_vec2().unwrap();
        assert_eq!(ours, candle);
        let err = super::silu_mul(&gate, &both).unwrap_err().to_string();
        assert!(err.contains("differ in shape"), "{err}");
    }
}
