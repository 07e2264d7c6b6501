//! Choosing the compute device once (cpu by default; cuda and metal behind Cargo features).

use candle_core::Device;

use crate::settings::DeviceKind;
use crate::{Error, Result};

/// Returns the device for `arg`, or an error that says how to get a build that has it.
pub fn select_device(arg: DeviceKind) -> Result<Device> {
    match arg {
        DeviceKind::Cpu => Ok(Device::Cpu),
        DeviceKind::Cuda if cfg!(feature = "cuda") => Ok(Device::new_cuda(0)?),
        DeviceKind::Cuda => Err(Error::Usage(
            "this build has no CUDA support: rebuild with `cargo build --release --features cuda`".into(),
        )),
        DeviceKind::Metal if cfg!(feature = "metal") => Ok(Device::new_metal(0)?),
        DeviceKind::Metal => Err(Error::Usage(
            "this build has no Metal support: rebuild with `cargo build --release --features metal`".into(),
        )),
    }
}

/// Sets the number of compute threads of the global rayon pool, which our kernels and candle's run on. Call
/// before the first tensor op (the pool is built once; a later call changes nothing).
///
/// candle's gemm also splits its work by `RAYON_NUM_THREADS`, read from the environment: the binary sets that
/// variable at start, before any thread exists (see `main.rs`), since changing the environment of a running
/// program races with every thread that reads it.
pub fn set_threads(threads: Option<usize>) {
    if let Some(n) = threads.filter(|n| *n > 0) {
        let _ = rayon::ThreadPoolBuilder::new().num_threads(n).build_global();
    }
}
