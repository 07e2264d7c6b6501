//! Elementwise steps of a layer fused into one CUDA launch each (`cuda/fused.cu`, see `gpu`): the residual add
//! with the RMS norm that follows it (two of candle's launches, twice a layer) and the gated SiLU (two launches).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};

use super::gpu::{contiguous_view, cpu_only, view_from_start, FUSED};
use crate::Result;

/// Threads of a block (`THREADS` in the source).
const THREADS: u32 = 256;

/// `x + delta` and its RMS norm scaled by `weight`, in one launch: `(sum, normed)`, each shaped like `x`
/// (`[.., hidden]`, contiguous).
pub fn add_rms_norm(x: &Tensor, delta: &Tensor, weight: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
    let both = x.apply_op3_no_bwd(delta, weight, &AddRmsNorm { eps })?; // [2, elements of x]
    let sum = both.get(0)?.reshape(x.shape())?;
    let normed = both.get(1)?.reshape(x.shape())?;
    Ok((sum, normed))
}

/// `silu(gate) * up` in one launch (`[.., width]` each; rows may be strided, as the halves of a stacked
/// projection are).
pub fn silu_mul(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    Ok(gate.apply_op2_no_bwd(up, &SiluMul)?)
}

struct AddRmsNorm {
    eps: f32,
}

impl CustomOp3 for AddRmsNorm {
    fn name(&self) -> &'static str {
        "tandem-add-rms-norm"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_only(self.name()))
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        x_layout: &Layout,
        delta: &CudaStorage,
        delta_layout: &Layout,
        weight: &CudaStorage,
        weight_layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let hidden = x_layout.shape().dims().last().copied().unwrap_or(0);
        let elements = x_layout.shape().elem_count();
        if delta_layout.shape() != x_layout.shape() || weight_layout.shape().dims() != [hidden] || hidden == 0 {
            candle_core::bail!(
                "add_rms_norm: x {:?}, delta {:?}, weight {:?}",
                x_layout.shape(),
                delta_layout.shape(),
                weight_layout.shape()
            );
        }
        let device = x.device();
        let stream = device.cuda_stream();
        let (x, delta) = (contiguous_view(x, x_layout)?, contiguous_view(delta, delta_layout)?);
        let weight = contiguous_view(weight, weight_layout)?;
        // Both outputs in one buffer, the sum then the norm: candle takes one storage per op.
        // SAFETY: the buffer starts uninitialized; nothing reads it before `tandem_add_rms_norm` below, whose
        // `elements / hidden` blocks each store their row's `hidden` sums and `hidden` normed values: all of it.
        let mut both = unsafe { device.alloc::<f32>(2 * elements)? };
        let function = FUSED.function(device, "tandem_add_rms_norm")?;
        let mut launch = stream.launch_builder(&function);
        let (elements_i, hidden_i) = (elements as i64, hidden as i32);
        launch.arg(&x).arg(&delta).arg(&weight).arg(&mut both).arg(&elements_i).arg(&hidden_i).arg(&self.eps);
        let rows = (elements / hidden) as u32;
        let config = LaunchConfig { grid_dim: (rows, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments match the kernel's parameters; one block per row writes the row's outputs.
        unsafe { launch.launch(config) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(both, device.clone()), Shape::from((2, elements))))
    }
}

struct SiluMul;

/// A `[.., rows, width]` input's (rows, width, row stride); its width must be contiguous.
fn rows_of(layout: &Layout, what: &str) -> candle_core::Result<(usize, usize, usize)> {
    let dims = layout.shape().dims();
    let stride = layout.stride();
    let (Some(&width), Some(&last_stride)) = (dims.last(), stride.last()) else {
        candle_core::bail!("silu_mul: {what} has no dimensions");
    };
    let rows = layout.shape().elem_count() / width.max(1);
    // Rows are evenly spaced when every outer dimension is 1 or the tensor is contiguous.
    let row_stride = if dims.len() >= 2 { stride[dims.len() - 2] } else { width };
    let even = layout.is_contiguous() || dims[..dims.len().saturating_sub(2)].iter().all(|&d| d == 1);
    if last_stride != 1 || !even {
        candle_core::bail!("silu_mul: {what}'s rows must be evenly spaced and contiguous, got {layout:?}");
    }
    Ok((rows, width, row_stride))
}

impl CustomOp2 for SiluMul {
    fn name(&self) -> &'static str {
        "tandem-silu-mul"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_only(self.name()))
    }

    fn cuda_fwd(
        &self,
        gate: &CudaStorage,
        gate_layout: &Layout,
        up: &CudaStorage,
        up_layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        if gate_layout.shape() != up_layout.shape() {
            candle_core::bail!("silu_mul: gate {:?} and up {:?}", gate_layout.shape(), up_layout.shape());
        }
        let (rows, width, gate_stride) = rows_of(gate_layout, "gate")?;
        let (_, _, up_stride) = rows_of(up_layout, "up")?;
        let device = gate.device();
        let stream = device.cuda_stream();
        let (gate, up) = (view_from_start(gate, gate_layout)?, view_from_start(up, up_layout)?);
        // SAFETY: the buffer starts uninitialized; nothing reads it before `tandem_silu_mul` below, whose
        // grid-stride loop stores every one of the `rows * width` outputs.
        let mut out = unsafe { device.alloc::<f32>(rows * width)? };
        let function = FUSED.function(device, "tandem_silu_mul")?;
        let mut launch = stream.launch_builder(&function);
        let (rows_i, width_i, gate_stride, up_stride) =
            (rows as i32, width as i32, gate_stride as i64, up_stride as i64);
        launch.arg(&gate).arg(&up).arg(&mut out).arg(&rows_i).arg(&width_i).arg(&gate_stride).arg(&up_stride);
        let blocks = (rows * width).div_ceil(THREADS as usize).clamp(1, 65_535) as u32;
        let config = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments match the kernel's parameters; the grid strides over every output element.
        unsafe { launch.launch(config) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(out, device.clone()), gate_layout.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::attention::tests::values;
    use candle_core::{Device, D};

    /// Deterministic values in [-2, 2).
    fn random(shape: &[usize], seed: u64, device: &Device) -> Tensor {
        let n: usize = shape.iter().product();
        (Tensor::from_vec(values(n, seed), shape, device).unwrap() * 2.0).unwrap()
    }

    fn max_difference(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
    }

    /// The fused residual add and norm give candle's `x + delta` and `rms_norm` (both models' widths).
    #[test]
    fn add_rms_norm_is_candles_add_then_norm() {
        let device = Device::new_cuda(0).expect("these tests need a CUDA device");
        for (rows, hidden) in [(1, 896), (5, 1536)] {
            let (x, delta) = (random(&[1, rows, hidden], 1, &device), random(&[1, rows, hidden], 2, &device));
            let weight = random(&[hidden], 3, &device);
            let (sum, normed) = add_rms_norm(&x, &delta, &weight, 1e-6).unwrap();
            let expected_sum = (&x + &delta).unwrap();
            let expected = candle_nn::ops::rms_norm(&expected_sum, &weight, 1e-6).unwrap();
            assert_eq!(sum.dims(), x.dims());
            assert_eq!(max_difference(&sum, &expected_sum), 0.0);
            assert!(max_difference(&normed, &expected) < 1e-5, "{rows}×{hidden}");
        }
    }

    /// The gated SiLU over the two halves of a stacked projection (strided rows) and over separate tensors gives
    /// candle's `silu(gate) * up`.
    #[test]
    fn silu_mul_is_candles_silu_times_up() {
        let device = Device::new_cuda(0).expect("these tests need a CUDA device");
        let stacked = random(&[1, 3, 2 * 4864], 4, &device);
        let (gate, up) = (stacked.narrow(D::Minus1, 0, 4864).unwrap(), stacked.narrow(D::Minus1, 4864, 4864).unwrap());
        let expected = (candle_nn::ops::silu(&gate).unwrap() * &up).unwrap();
        assert!(max_difference(&silu_mul(&gate, &up).unwrap(), &expected) < 1e-6);
        let (gate, up) = (random(&[1, 2, 8960], 5, &device), random(&[1, 2, 8960], 6, &device));
        let expected = (candle_nn::ops::silu(&gate).unwrap() * &up).unwrap();
        assert!(max_difference(&silu_mul(&gate, &up).unwrap(), &expected) < 1e-6);
    }
}
