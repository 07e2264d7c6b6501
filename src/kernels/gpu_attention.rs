//! Attention on CUDA for a forward pass over several sequences: two kernel launches a layer for all of them.
//!
//! candle's attention route costs about nine launches per sequence and layer (copying the sequence's rows out,
//! writing its keys and values, two matrix products, scale, softmax, a transpose), so sequences decoded together
//! (`tandem batch --parallel`) gained little. Here one launch writes every row's new keys and values into its own
//! sequence's cache, and one computes every row's causal attention over its cache (`cuda/pass_attention.cu`, see
//! `gpu`). Parts of a pass are described by a table of device addresses uploaded once per pass ([`PassTable`]).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, WrapErr};
use candle_core::{CpuStorage, CudaStorage, CustomOp3, Device, Layout, Shape, Tensor};

use super::gpu::{contiguous_view, cpu_only, PASS_ATTENTION};
use crate::Result;

/// Values per part in the table (`FIELDS` in the source).
const FIELDS: usize = 5;

/// The widest head the attention kernel holds in shared memory (`MAX_HEAD_DIM` in the source).
const MAX_HEAD_DIM: usize = 256;

/// Threads of an attention block (`THREADS` in the source).
const THREADS: u32 = 256;

/// Whether the kernels take heads this wide: at most `MAX_HEAD_DIM`, in whole float4s.
pub fn head_dim_fits(head_dim: usize) -> bool {
    head_dim <= MAX_HEAD_DIM && head_dim.is_multiple_of(4)
}

/// A pass of one sequence takes these kernels up to this many tokens; a longer one (a prompt's prefill) takes
/// candle's matrix products, which do that work faster and whose launch count then no longer matters.
pub const MAX_ALONE_TOKENS: usize = 64;

/// A pass shared by several sequences takes these kernels while each part is at most this long (candle's route
/// would cost its launches once per part); the kernels' work grows with the square of a part's length.
pub const MAX_SHARED_TOKENS: usize = 2048;

/// Whether a pass whose parts have these token counts takes these kernels.
pub fn takes(part_tokens: impl Iterator<Item = usize>) -> bool {
    let (mut parts, mut longest) = (0, 0);
    for tokens in part_tokens {
        parts += 1;
        longest = longest.max(tokens);
    }
    longest <= if parts > 1 { MAX_SHARED_TOKENS } else { MAX_ALONE_TOKENS }
}

/// One part's cache for one layer, as the kernels read it.
#[derive(Debug, Clone, Copy)]
pub struct PartCache {
    /// Keys and values buffers, `[1, n_kv_head, capacity, head_dim]` f32 each ([`super::gpu::device_address`]).
    pub keys: u64,
    pub values: u64,
    /// Positions the buffers hold.
    pub capacity: usize,
    /// Positions cached before this pass: the part's first new token goes there.
    pub position: usize,
}

/// Every layer's part caches of one pass, on the device.
pub struct PassTable {
    table: CudaSlice<u64>,
    layers: usize,
    parts: usize,
    /// The pass's rows: every part's new tokens.
    rows: usize,
}

impl PassTable {
    /// Uploads `caches[layer][part]`; `part_rows[part]` is how many rows (new tokens) each part has.
    pub fn upload(device: &Device, caches: &[Vec<PartCache>], part_rows: &[usize]) -> Result<Self> {
        let Device::Cuda(cuda) = device else {
            return Err(candle_core::Error::Msg("pass attention needs a CUDA device".into()).into());
        };
        let parts = part_rows.len();
        let mut values = Vec::with_capacity(caches.len() * parts * FIELDS);
        for layer in caches {
            if layer.len() != parts {
                return Err(candle_core::Error::Msg(format!("{} caches for {parts} parts", layer.len())).into());
            }
            let mut first_row = 0;
            for (cache, rows) in layer.iter().zip(part_rows) {
                if cache.position + rows > cache.capacity {
                    return Err(candle_core::Error::Msg(format!(
                        "a cache of {} positions cannot take {rows} more after {}",
                        cache.capacity, cache.position
                    ))
                    .into());
                }
                values.extend([cache.keys, cache.values, cache.capacity as u64, cache.position as u64, first_row]);
                first_row += *rows as u64;
            }
        }
        let table = cuda.cuda_stream().clone_htod(&values[..]).w()?;
        Ok(Self { table, layers: caches.len(), parts, rows: part_rows.iter().sum() })
    }

    /// Writes `k` and `v` (`[1, rows, n_kv_head, head_dim]`) into layer `layer`'s caches and returns every row's
    /// attention over its own sequence, `[1, rows, n_head * head_dim]`; `q` is `[1, rows, n_head, head_dim]`.
    /// The caller then counts the new positions as cached.
    pub fn attend(&self, layer: usize, q: &Tensor, k: &Tensor, v: &Tensor, scale: f32) -> Result<Tensor> {
        if layer >= self.layers {
            return Err(candle_core::Error::Msg(format!("layer {layer} of a table of {}", self.layers)).into());
        }
        let stream = match q.device() {
            Device::Cuda(cuda) => cuda.cuda_stream(),
            _ => return Err(candle_core::Error::Msg("pass attention needs a CUDA device".into()).into()),
        };
        let (base, _sync) = self.table.device_ptr(&stream);
        let table = base + (layer * self.parts * FIELDS * std::mem::size_of::<u64>()) as u64;
        let op = PassAttention { table, parts: self.parts, rows: self.rows, scale };
        Ok(q.apply_op3_no_bwd(k, v, &op)?)
    }
}

/// The two launches for one layer (a candle op, so that candle hands over the inputs' device memory and takes
/// the output's).
struct PassAttention {
    /// This layer's rows of the table.
    table: u64,
    parts: usize,
    rows: usize,
    scale: f32,
}

/// A contiguous f32 input's `[1, rows, heads, head_dim]` dims.
fn dims(layout: &Layout, what: &str) -> candle_core::Result<(usize, usize, usize)> {
    let (one, rows, heads, head_dim) = layout.shape().dims4()?;
    if one != 1 || !layout.is_contiguous() {
        candle_core::bail!("pass attention: {what} must be contiguous [1, rows, heads, head_dim], got {layout:?}");
    }
    Ok((rows, heads, head_dim))
}

impl CustomOp3 for PassAttention {
    fn name(&self) -> &'static str {
        "tandem-pass-attention"
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
        q: &CudaStorage,
        q_layout: &Layout,
        k: &CudaStorage,
        k_layout: &Layout,
        v: &CudaStorage,
        v_layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (rows, n_head, head_dim) = dims(q_layout, "q")?;
        let (k_rows, n_kv, k_dim) = dims(k_layout, "k")?;
        if rows != self.rows || k_rows != rows || k_dim != head_dim || v_layout.shape() != k_layout.shape() {
            candle_core::bail!(
                "pass attention: q {:?}, k {:?}, v {:?} for {} rows",
                q_layout.shape(),
                k_layout.shape(),
                v_layout.shape(),
                self.rows
            );
        }
        if !v_layout.is_contiguous() || !head_dim_fits(head_dim) || n_kv == 0 || n_head % n_kv != 0 {
            candle_core::bail!("pass attention: unsupported heads ({n_head} of {n_kv}, dim {head_dim})");
        }
        let device: &CudaDevice = q.device();
        let stream = device.cuda_stream();
        let (q, k, v) = (contiguous_view(q, q_layout)?, contiguous_view(k, k_layout)?, contiguous_view(v, v_layout)?);
        let (parts, n_head_i, n_kv_i, dim_i) = (self.parts as i32, n_head as i32, n_kv as i32, head_dim as i32);

        let append = PASS_ATTENTION.function(device, "tandem_kv_append")?;
        let mut launch = stream.launch_builder(&append);
        launch.arg(&k).arg(&v).arg(&self.table).arg(&parts).arg(&n_kv_i).arg(&dim_i);
        let config = LaunchConfig {
            grid_dim: (rows as u32, n_kv as u32, 1),
            block_dim: (head_dim.min(256) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments match the kernel's parameters; the table's rows were checked to fit the caches.
        unsafe { launch.launch(config) }.w()?;

        // SAFETY: the buffer starts uninitialized; nothing reads it before `tandem_pass_attention` below, which
        // writes all of it: block (row, head) stores every one of that head's `head_dim` outputs.
        let mut out = unsafe { device.alloc::<f32>(rows * n_head * head_dim)? };
        let attend = PASS_ATTENTION.function(device, "tandem_pass_attention")?;
        let mut launch = stream.launch_builder(&attend);
        launch
            .arg(&q)
            .arg(&mut out)
            .arg(&self.table)
            .arg(&parts)
            .arg(&n_head_i)
            .arg(&n_kv_i)
            .arg(&dim_i)
            .arg(&self.scale);
        let config =
            LaunchConfig { grid_dim: (rows as u32, n_head as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: as above; every output element is written (one block per row and head, one thread per dim).
        unsafe { launch.launch(config) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(out, device.clone()), Shape::from((1, rows, n_head * head_dim))))
    }
}

// Its test against candle's route runs on the KV caches of `llm` and lives there: `llm::kv_cache_gpu_tests`.
