//! Our CUDA kernels' common ground: sources compiled at first use with NVRTC, device addresses, f32 views.
//!
//! A GPU decode step is bound by kernel launches (each of candle's ops costs one, with an allocation), not by
//! memory, so our kernels serve many rows or several ops in one launch: `gpu_attention` (every sequence of a
//! pass) and `gpu_fused` (residual add with RMS norm, gated SiLU). `TANDEM_GPU_KERNELS=candle` keeps candle's
//! ops everywhere and `TANDEM_GPU_KERNELS=attention` takes the pass attention alone, to compare ([`Ours`]).

use std::sync::OnceLock;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaFunction, CudaView, DevicePtr};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{CudaStorage, Device, Layout, Storage, Tensor};

use crate::Result;

/// A CUDA C source of ours and its PTX, compiled once per process.
pub(crate) struct Source {
    /// The module's name in candle's store of loaded modules.
    name: &'static str,
    text: &'static str,
    ptx: OnceLock<std::result::Result<String, String>>,
}

/// The pass-attention kernels.
pub(crate) static PASS_ATTENTION: Source =
    Source { name: "tandem_pass_attention", text: include_str!("cuda/pass_attention.cu"), ptx: OnceLock::new() };

/// The fused elementwise kernels.
pub(crate) static FUSED: Source =
    Source { name: "tandem_fused", text: include_str!("cuda/fused.cu"), ptx: OnceLock::new() };

impl Source {
    /// The PTX (an error says why NVRTC failed).
    fn ptx(&self) -> std::result::Result<&str, String> {
        self.ptx
            .get_or_init(|| {
                candle_core::cuda_backend::cudarc::nvrtc::compile_ptx(self.text)
                    .map(|ptx| ptx.to_src())
                    .map_err(|e| format!("compiling {} with NVRTC: {e}", self.name))
            })
            .as_deref()
            .map_err(Clone::clone)
    }

    /// One of the source's kernels, loaded on `device` (once; candle keeps the module).
    pub(crate) fn function(&self, device: &CudaDevice, kernel: &str) -> candle_core::Result<CudaFunction> {
        let ptx = self.ptx().map_err(candle_core::Error::Msg)?;
        Ok(device.get_or_load_custom_func(kernel, self.name, ptx)?.into_cuda_function())
    }
}

/// Which of our kernels a model on the GPU takes (`TANDEM_GPU_KERNELS`: `all`, the default; `attention`, the pass
/// attention alone; `candle`, none), when NVRTC can compile them (checked once; on failure the reason is logged
/// and candle's ops are used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ours {
    /// The pass attention (`gpu_attention`).
    pub attention: bool,
    /// The fused elementwise steps (`gpu_fused`).
    pub fused: bool,
}

impl Ours {
    /// Candle's ops only.
    pub const NONE: Ours = Ours { attention: false, fused: false };

    /// What runs on `device`.
    pub fn on(device: &Device) -> Ours {
        static CHOICE: OnceLock<Ours> = OnceLock::new();
        if !device.is_cuda() {
            return Ours::NONE;
        }
        *CHOICE.get_or_init(|| {
            let choice = match crate::settings::env::gpu_kernels().as_deref() {
                Some("candle") => return Ours::NONE,
                Some("attention") => Ours { attention: true, fused: false },
                _ => Ours { attention: true, fused: true },
            };
            match PASS_ATTENTION.ptx().and(FUSED.ptx()) {
                Ok(_) => choice,
                Err(reason) => {
                    tracing::warn!("{reason}; the GPU runs candle's kernels only");
                    Ours::NONE
                }
            }
        })
    }
}

/// The error a kernel of ours gives when candle asks for it on the CPU (the CPU keeps its own ops).
pub(crate) fn cpu_only(name: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!("{name} runs on CUDA only (the CPU keeps its own ops)"))
}

/// The device address of a CUDA tensor's first element (f32).
pub fn device_address(tensor: &Tensor) -> Result<u64> {
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cuda(cuda) = &*storage else {
        return Err(candle_core::Error::Msg("our GPU kernels need tensors on a CUDA device".into()).into());
    };
    let slice = cuda.as_cuda_slice::<f32>()?;
    let stream = cuda.device().cuda_stream();
    let (address, _sync) = slice.device_ptr(&stream);
    Ok(address + (layout.start_offset() * std::mem::size_of::<f32>()) as u64)
}

/// A contiguous f32 input's elements on the device.
pub(crate) fn contiguous_view<'a>(storage: &'a CudaStorage, layout: &Layout) -> candle_core::Result<CudaView<'a, f32>> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("our GPU kernels need contiguous inputs, got {layout:?}");
    };
    Ok(storage.as_cuda_slice::<f32>()?.slice(start..end))
}

/// An f32 input's elements from its first one on (for inputs read with their own strides).
pub(crate) fn view_from_start<'a>(storage: &'a CudaStorage, layout: &Layout) -> candle_core::Result<CudaView<'a, f32>> {
    Ok(storage.as_cuda_slice::<f32>()?.slice(layout.start_offset()..))
}
