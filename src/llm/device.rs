//! Choosing the compute device once (cpu by default; cuda and metal behind Cargo features).

use candle_core::Device;

use crate::cli::DeviceArg;
use crate::{Error, Result};

/// Returns the device for `arg`, or an error that says how to get a build that has it.
pub fn select_device(arg: DeviceArg) -> Result<Device> {
    match arg {
        DeviceArg::Cpu => Ok(Device::Cpu),
        DeviceArg::Cuda if cfg!(feature = "cuda") => Ok(Device::new_cuda(0)?),
        DeviceArg::Cuda => Err(Error::Usage(
            "this build has no CUDA support: rebuild with `cargo build --release --features cuda`".into(),
        )),
        DeviceArg::Metal if cfg!(feature = "metal") => Ok(Device::new_metal(0)?),
        DeviceArg::Metal => Err(Error::Usage(
            "this build has no Metal support: rebuild with `cargo build --release --features metal`".into(),
        )),
    }
}

/// Sets the number of compute threads for candle's CPU kernels. Call before the first tensor op.
pub fn set_threads(threads: Option<usize>) {
    if let Some(n) = threads.filter(|n| *n > 0) {
        // candle reads RAYON_NUM_THREADS for both its rayon pool and gemm; the global pool is
        // built lazily, so setting both here, before any work, takes effect.
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
        let _ = rayon::ThreadPoolBuilder::new().num_threads(n).build_global();
    }
}
