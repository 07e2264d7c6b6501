//! Qwen2 / Qwen2.5 (and -Coder) from GGUF: our own forward pass on candle ops.
//!
//! Ours rather than candle-transformers' so that we control the hot path: a rewindable preallocated KV cache
//! (prompt-prefix reuse), grouped-query attention without copying K/V per head, a quantized embedding table
//! (no 0.5–0.9 GB f32 copy), and a one-time conversion of tensor types that candle's CPU kernels run slowly.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor, D};

use super::gguf::{GgufFile, LoadError};
use super::kv_cache::CacheSlots;
use super::mapped_rows::MappedRows;
use super::prefix_store::{common_prefix, KvSnapshot};
use super::{LanguageModel, LoadOptions, MultiSequence, SequenceId, SequencePass};
use crate::kernels::attention::{candle_attention, causal_attention};
#[cfg(feature = "cuda")]
use crate::kernels::gpu::{self, device_address};
#[cfg(feature = "cuda")]
use crate::kernels::gpu_attention::{self, PartCache, PassTable};
#[cfg(feature = "cuda")]
use crate::kernels::gpu_fused;
use crate::kernels::QLinear;
use crate::Result;

/// Without CUDA there is never a pass table (see `kernels::gpu_attention`).
#[cfg(not(feature = "cuda"))]
enum PassTable {}

#[cfg(not(feature = "cuda"))]
impl PassTable {
    fn attend(&self, _: usize, _: &Tensor, _: &Tensor, _: &Tensor, _: f32) -> Result<Tensor> {
        match *self {}
    }
}

/// Which of our GPU kernels the model's passes on `device` take (`kernels::gpu::Ours`): (pass attention, fused
/// elementwise steps).
fn ours_on_gpu(device: &Device) -> (bool, bool) {
    #[cfg(feature = "cuda")]
    {
        let ours = gpu::Ours::on(device);
        (ours.attention, ours.fused)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        (false, false)
    }
}

/// `x += delta` (when there is one), then `x`'s RMS norm scaled by `weight`: with `ours`, one launch on the GPU.
fn add_and_norm(x: &mut Tensor, delta: Option<Tensor>, weight: &Tensor, eps: f32, ours: bool) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if let (true, Some(delta)) = (ours, &delta) {
        let (sum, normed) = gpu_fused::add_rms_norm(x, delta, weight, eps)?;
        *x = sum;
        return Ok(normed);
    }
    let _ = ours;
    if let Some(delta) = delta {
        *x = (&*x + delta)?;
    }
    Ok(candle_nn::ops::rms_norm(x, weight, eps)?)
}

/// `silu(gate) * up`: with `ours`, one launch on the GPU.
fn gated_silu(gate: &Tensor, up: &Tensor, ours: bool) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if ours {
        return gpu_fused::silu_mul(gate, up);
    }
    let _ = ours;
    Ok((candle_nn::ops::silu(gate)? * up)?)
}

/// Sequences whose KV caches a model keeps: the planner's and the executor's prompt families when one model
/// plays both roles, and one spare (buffers grow on use, about 25–57 KB a position).
const KV_SLOTS: usize = 3;

/// Positions another sequence must cache beyond the current slot's for [`Qwen2::borrow_prefix`] to copy them:
/// fewer are computed about as fast as copied.
const MIN_BORROWED: usize = 16;

/// Rows of a CPU pass the feed-forward block takes at a time (see `Qwen2::pass`): a 512-token prompt's
/// intermediates for the 0.5B take 40 MB at once, 10 MB in slices of 128.
const FFN_ROWS_AT_ONCE: usize = 128;

/// The sequence a model uses until told otherwise (see [`MultiSequence::use_sequence`]).
const OWN_SEQUENCE: SequenceId = 0;

/// Hyper-parameters read from `qwen2.*` metadata.
#[derive(Debug, Clone)]
pub struct Qwen2Config {
    pub n_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub hidden: usize,
    pub head_dim: usize,
    pub context_length: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
}

impl Qwen2Config {
    fn from_gguf(file: &GgufFile) -> Result<Self, LoadError> {
        let hidden = file.usize("qwen2.embedding_length")?;
        let n_head = file.usize("qwen2.attention.head_count")?;
        let n_kv_head = file.usize("qwen2.attention.head_count_kv").unwrap_or(n_head);
        if n_head == 0 || n_kv_head == 0 || hidden % n_head != 0 || n_head % n_kv_head != 0 {
            return Err(LoadError::BadHeader {
                path: file.path().to_path_buf(),
                message: format!("inconsistent head counts: hidden {hidden}, heads {n_head}, kv heads {n_kv_head}"),
            });
        }
        Ok(Self {
            n_layer: file.usize("qwen2.block_count")?,
            n_head,
            n_kv_head,
            hidden,
            head_dim: hidden / n_head,
            context_length: file.usize("qwen2.context_length").unwrap_or(32768),
            rms_eps: file.f32("qwen2.attention.layer_norm_rms_epsilon").unwrap_or(1e-6),
            rope_base: file.f32("qwen2.rope.freq_base").unwrap_or(1_000_000.0),
        })
    }
}

struct Layer {
    attn_norm: Tensor,
    /// The query, key and value projections (with their biases), stacked where their types allow.
    qkv: StackedLinear,
    wo: QLinear,
    ffn_norm: Tensor,
    /// The gate and up projections, stacked where their types allow.
    gate_up: StackedLinear,
    down: QLinear,
}

impl Layer {
    /// The feed-forward block's output for its normed input `h`: gated SiLU, then the down projection.
    fn feed_forward(&self, h: &Tensor, ours: bool) -> Result<Tensor> {
        let [gate, up]: [Tensor; 2] = self.gate_up.forward(h)?.try_into().map_err(|_| parts_error("gate/up"))?;
        Ok(self.down.forward(&gated_silu(&gate, &up, ours)?)?)
    }
}

/// Linear layers that read the same input; on a GPU, consecutive ones of the same type and width are stacked into
/// one matrix, so one matmul's launches replace several. Each output row is computed exactly as the separate
/// layer would, so results do not change.
struct StackedLinear {
    /// Each group: the (stacked) layer, its bias (stacked likewise), and the output width of each part.
    groups: Vec<(QLinear, Option<Tensor>, Vec<usize>)>,
}

impl StackedLinear {
    /// The layers, for load reports and checks.
    fn linears(&self) -> impl Iterator<Item = &QLinear> {
        self.groups.iter().map(|(linear, _, _)| linear)
    }

    /// Every part's output `[.., width]`, in the order the parts were given.
    fn forward(&self, x: &Tensor) -> Result<Vec<Tensor>> {
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
enum TokenTable {
    /// Rows read from the mapped file on demand: an untied table on the CPU.
    Mapped(MappedRows),
    /// A loaded matrix: tied to the output projection, or on a GPU.
    Loaded(QLinear),
}

impl TokenTable {
    /// Rows picked by `ids` as f32, shape `ids.dims() ++ [hidden]`.
    fn lookup(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Self::Mapped(rows) => Ok(rows.lookup(ids)?),
            Self::Loaded(table) => table.embedding(ids),
        }
    }
}

/// A loaded Qwen2 model with its KV cache.
pub struct Qwen2 {
    config: Qwen2Config,
    /// The token embedding table (the same matrix as `output` when the model ties them).
    embedding: TokenTable,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QLinear,
    n_logits: usize,
    /// RoPE tables, `[positions, head_dim / 2]`, for the positions used so far (grown by `ROPE_GROWTH`).
    cos: Tensor,
    sin: Tensor,
    /// Additive causal masks by (new tokens, total positions).
    masks: HashMap<(usize, usize), Tensor>,
    device: Device,
    /// Independent sequences (one per concurrent generation when batching across them; the model's own is
    /// [`OWN_SEQUENCE`]), each with KV caches of a few prompt families and the token ids each holds: generation
    /// picks the slot sharing the longest prefix with its prompt and reuses that prefix instead of recomputing it.
    sequences: HashMap<SequenceId, CacheSlots>,
    /// The sequence that `LanguageModel`'s methods act on.
    current: SequenceId,
    /// The id the next opened sequence gets.
    next_sequence: SequenceId,
    /// Whether every product runs on our kernels on the CPU (with our attention), so batches are exact.
    exact_batches: bool,
    /// Whether passes take our GPU attention for every sequence of a pass ([`ours_on_gpu`]).
    #[cfg(feature = "cuda")]
    gpu_attention: bool,
    /// Whether passes take our fused GPU elementwise steps ([`ours_on_gpu`]).
    gpu_fused: bool,
}

/// Loads tensors and converts slow types once; counts conversions for the load report.
struct TensorLoader<'a> {
    file: &'a GgufFile,
    device: &'a Device,
    keep_types: bool,
    /// Q5_0/Q5_1 tensors requantized to Q8_0 for candle's kernels.
    converted: usize,
    /// Q5_0 tensors widened exactly to int8 for ours (the rest of them stay at five bits in ours).
    widened: usize,
    /// Whether `stacked` stacks matrices. By default only off the CPU: on a GPU each matmul costs launches
    /// (stacking gave decode +5 % on the 0.5B and +15 % on the 1.5B on an H100), while on 2 CPU cores the stacked
    /// matrices decoded 4–7 % slower than separate ones.
    stack: bool,
}

impl TensorLoader<'_> {
    /// A vector (norm weight or bias) as f32.
    fn vector(&self, name: &str) -> Result<Tensor> {
        Ok(self.file.tensor(name, self.device)?.dequantize(self.device)?)
    }

    /// A weight matrix, on our kernels where this CPU has them.
    fn matrix(&mut self, name: &str) -> Result<QLinear> {
        let tensor = self.file.tensor(name, self.device)?;
        self.linear(tensor)
    }

    /// Matrices that read the same input, with their biases: consecutive ones of the same type and width are
    /// stacked into one (see [`StackedLinear`]).
    fn stacked(&mut self, names: &[&str], biases: Option<&[&str]>) -> Result<StackedLinear> {
        let mut layouts = Vec::with_capacity(names.len());
        for name in names {
            let (dtype, dims) = self.file.tensor_layout(name)?;
            layouts.push((dtype, dims.get(1).copied(), dims.first().copied().unwrap_or(0)));
        }
        let mut groups = Vec::new();
        let mut start = 0;
        while start < names.len() {
            let fits = |i: usize| self.stack && layouts[i].0 == layouts[start].0 && layouts[i].1 == layouts[start].1;
            let mut end = (start + 1..names.len()).find(|&i| !fits(i)).unwrap_or(names.len());
            let linear = if end - start == 1 {
                self.matrix(names[start])?
            } else {
                match self.file.stacked_rows(&names[start..end], self.device)? {
                    Some(tensor) => self.linear(tensor)?,
                    None => {
                        end = start + 1;
                        self.matrix(names[start])?
                    }
                }
            };
            let bias = match biases {
                Some(biases) => {
                    let parts = biases[start..end].iter().map(|b| self.vector(b)).collect::<Result<Vec<_>>>()?;
                    Some(if parts.len() == 1 { parts[0].clone() } else { Tensor::cat(&parts, 0)? })
                }
                None => None,
            };
            groups.push((linear, bias, layouts[start..end].iter().map(|l| l.2).collect()));
            start = end;
        }
        Ok(StackedLinear { groups })
    }

    /// A loaded weight matrix as a layer: our kernels where this CPU has them (Q5_0 included), else candle's (Q5_0
    /// converted to Q8_0 on the CPU).
    fn linear(&mut self, tensor: QTensor) -> Result<QLinear> {
        if !self.keep_types {
            if let Some(ours) = QLinear::widened(&tensor)? {
                self.widened += usize::from(tensor.dtype() == GgmlDType::Q5_0 && ours.kernel_name() == "tandem-q8_0");
                return Ok(ours);
            }
        }
        QLinear::new(self.convert(tensor)?)
    }

    /// Where our kernels do not run, candle 0.11 has no fast CPU kernel for Q5_0/Q5_1 (the 0.5B model stores
    /// most weights so, since its width 896 is not a multiple of 256): requantize them to Q8_0, which has one.
    /// Q5_0 values are integers in [-16, 15] times a per-block scale, so Q8_0 represents them almost exactly.
    fn convert(&mut self, tensor: QTensor) -> Result<QTensor> {
        let slow = matches!(tensor.dtype(), GgmlDType::Q5_0 | GgmlDType::Q5_1);
        if self.keep_types || !slow || !self.device.is_cpu() {
            return Ok(tensor);
        }
        self.converted += 1;
        let dense = tensor.dequantize(self.device)?;
        Ok(QTensor::quantize(&dense, GgmlDType::Q8_0)?)
    }
}

impl Qwen2 {
    /// Builds the model from a GGUF file whose architecture is `qwen2`.
    pub fn load(
        file: &GgufFile,
        device: &Device,
        options: &LoadOptions,
        conversions: &mut Vec<String>,
    ) -> Result<Self> {
        let config = Qwen2Config::from_gguf(file)?;
        let mut loader = TensorLoader {
            file,
            device,
            keep_types: options.keep_tensor_types,
            converted: 0,
            widened: 0,
            stack: options.stack_projections.unwrap_or(!device.is_cpu()),
        };
        let (_, dims) = file.tensor_layout("token_embd.weight")?;
        let (n_logits, hidden) = match dims[..] {
            [rows, cols] => (rows, cols),
            _ => (0, 0),
        };
        if hidden != config.hidden {
            return Err(LoadError::BadTensor {
                path: file.path().to_path_buf(),
                name: "token_embd.weight".into(),
                message: format!("shape {dims:?}: width differs from qwen2.embedding_length {}", config.hidden),
            }
            .into());
        }
        // Small models tie the output projection to the embedding table. An untied table only serves lookups:
        // on the CPU it stays in the mapped file.
        let (embedding, output) = match (file.has_tensor("output.weight"), device.is_cpu()) {
            (true, true) => {
                (TokenTable::Mapped(file.mapped_rows("token_embd.weight")?), loader.matrix("output.weight")?)
            }
            (true, false) => {
                let table = Arc::new(file.tensor("token_embd.weight", device)?);
                (TokenTable::Loaded(QLinear::Candle(QMatMul::from_arc(table)?)), loader.matrix("output.weight")?)
            }
            (false, _) => {
                let tied = QLinear::from_arc(Arc::new(file.tensor("token_embd.weight", device)?))?;
                (TokenTable::Loaded(tied.clone()), tied)
            }
        };
        let mut layers = Vec::with_capacity(config.n_layer);
        for i in 0..config.n_layer {
            let name = |part: &str| format!("blk.{i}.{part}");
            layers.push(Layer {
                attn_norm: loader.vector(&name("attn_norm.weight"))?,
                qkv: loader.stacked(
                    &[&name("attn_q.weight"), &name("attn_k.weight"), &name("attn_v.weight")],
                    Some(&[&name("attn_q.bias"), &name("attn_k.bias"), &name("attn_v.bias")]),
                )?,
                wo: loader.matrix(&name("attn_output.weight"))?,
                ffn_norm: loader.vector(&name("ffn_norm.weight"))?,
                gate_up: loader.stacked(&[&name("ffn_gate.weight"), &name("ffn_up.weight")], None)?,
                down: loader.matrix(&name("ffn_down.weight"))?,
            });
        }
        if loader.converted > 0 {
            conversions.push(format!("Q5_0/Q5_1→Q8_0: {} tensors", loader.converted));
        }
        if loader.widened > 0 {
            conversions.push(format!("Q5_0→int8 (exact, tandem kernel): {} tensors", loader.widened));
        }
        let norm = loader.vector("output_norm.weight")?;
        let (cos, sin) =
            rope_tables(config.head_dim, config.rope_base, ROPE_GROWTH.min(config.context_length), device)?;
        let n_layer = config.n_layer;
        // Norms, RoPE, biases and activations work on each row alone; the products and attention decide.
        let ours = |linear: &QLinear| linear.kernel_name() != "candle";
        let (gpu_attention, gpu_fused) = ours_on_gpu(device);
        #[cfg(not(feature = "cuda"))]
        let _ = gpu_attention;
        let exact_batches = device.is_cpu()
            && ours(&output)
            && layers
                .iter()
                .all(|l| ours(&l.wo) && ours(&l.down) && l.qkv.linears().all(ours) && l.gate_up.linears().all(ours));
        Ok(Self {
            config,
            embedding,
            layers,
            norm,
            output,
            n_logits,
            cos,
            sin,
            masks: HashMap::new(),
            sequences: HashMap::from([(OWN_SEQUENCE, CacheSlots::new(KV_SLOTS, n_layer))]),
            current: OWN_SEQUENCE,
            next_sequence: OWN_SEQUENCE + 1,
            device: device.clone(),
            exact_batches,
            #[cfg(feature = "cuda")]
            gpu_attention,
            gpu_fused,
        })
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Qwen2Config {
        &self.config
    }

    /// Grows the RoPE tables to cover `positions` (each position's row is computed alone, so a grown table holds
    /// the same values as a table built whole).
    fn cover_rope_positions(&mut self, positions: usize) -> Result<()> {
        let have = self.cos.dim(0)?;
        if positions > have {
            let c = &self.config;
            let rows = positions.div_ceil(ROPE_GROWTH).saturating_mul(ROPE_GROWTH).min(c.context_length.max(positions));
            (self.cos, self.sin) = rope_tables(c.head_dim, c.rope_base, rows, &self.device)?;
        }
        Ok(())
    }

    /// Additive mask `[seq, pos + seq]`: new token i (at absolute position pos + i) sees positions ≤ pos + i.
    /// Rectangular, so a batch after a cached prefix attends to the whole prefix.
    fn mask(&mut self, seq: usize, pos: usize) -> Result<Tensor> {
        let total = pos + seq;
        if let Some(mask) = self.masks.get(&(seq, total)) {
            return Ok(mask.clone());
        }
        let values: Vec<f32> =
            (0..seq).flat_map(|i| (0..total).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 })).collect();
        let mask = Tensor::from_vec(values, (seq, total), &self.device)?;
        if self.masks.len() > 64 {
            self.masks.clear();
        }
        self.masks.insert((seq, total), mask.clone());
        Ok(mask)
    }
}

impl Qwen2 {
    /// The current sequence's caches.
    fn caches(&self) -> &CacheSlots {
        self.sequences.get(&self.current).expect("the current sequence is always open")
    }

    /// The current sequence's caches, mutably.
    fn caches_mut(&mut self) -> &mut CacheSlots {
        self.sequences.get_mut(&self.current).expect("the current sequence is always open")
    }

    /// When another sequence caches a longer start of `prompt` than the current sequence's chosen slot, copies
    /// those positions' keys and values into the slot: generations running side by side (`tandem batch
    /// --parallel`) then compute their prompt family's long shared opening once instead of once each. A copy
    /// costs far less than the pass it saves (about 57 KB a position for the 1.5B against a prefill's compute).
    fn borrow_prefix(&mut self, prompt: &[u32]) -> Result<()> {
        let have = common_prefix(&self.caches().active().tokens, prompt);
        let best = self
            .sequences
            .iter()
            .filter(|(&id, _)| id != self.current)
            .flat_map(|(_, slots)| slots.slots())
            .map(|slot| (common_prefix(&slot.tokens, prompt), slot))
            .max_by_key(|(shared, _)| *shared);
        // At least one position of the prompt is always computed (its logits are wanted).
        let Some((shared, source)) = best.map(|(n, slot)| (n.min(prompt.len().saturating_sub(1)), slot)) else {
            return Ok(());
        };
        if shared < have + MIN_BORROWED {
            return Ok(());
        }
        let Some(copies) = source.prefix(shared)? else {
            return Ok(());
        };
        let (device, context) = (self.device.clone(), self.config.context_length);
        self.caches_mut().active_mut().replace(&copies, &prompt[..shared], &device, context)
    }

    /// For a pass the GPU's pass attention takes (`gpu_attention::takes`), on a device where it runs: cuts each part's
    /// caches back to its position, makes room for its new tokens in every layer and uploads where they live.
    #[cfg(feature = "cuda")]
    fn gpu_pass_table(&mut self, parts: &[SequencePass<'_>]) -> Result<Option<PassTable>> {
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

    /// Without CUDA, passes never take the GPU's pass attention.
    #[cfg(not(feature = "cuda"))]
    fn gpu_pass_table(&mut self, _: &[SequencePass<'_>]) -> Result<Option<PassTable>> {
        Ok(None)
    }

    /// Checks a pass's parts before anything changes: known sequences, one part each, tokens to run, positions
    /// that follow what each caches and fit the context.
    fn check_parts(&self, parts: &[SequencePass<'_>]) -> Result<()> {
        let mut seen = HashSet::new();
        for part in parts {
            let (seq, pos) = (part.tokens.len(), part.pos);
            let Some(slots) = self.sequences.get(&part.sequence) else {
                return Err(
                    candle_core::Error::Msg(format!("forward on sequence {} that is not open", part.sequence)).into()
                );
            };
            let cached = slots.active().layers.first().map_or(0, |l| l.len());
            if seq == 0 || pos > cached || pos + seq > self.config.context_length || !seen.insert(part.sequence) {
                return Err(candle_core::Error::Msg(format!(
                    "forward of {seq} tokens at position {pos} with {cached} cached positions and a context of {} \
                     (sequence {}, {} part(s) in the pass)",
                    self.config.context_length,
                    part.sequence,
                    parts.len()
                ))
                .into());
            }
        }
        if parts.is_empty() {
            return Err(candle_core::Error::Msg("a forward pass with no tokens".into()).into());
        }
        Ok(())
    }

    /// One forward pass over the new tokens of one or more sequences, their rows stacked so that each weight
    /// matrix is read once for all of them (each sequence's cache is cut back to its `pos` first; attention runs
    /// per sequence). Returns each part's logits: its last position's, `[n_logits]`, or with `every_position` each
    /// position's, `[tokens, n_logits]`. Every product and our attention compute a row alone, so on our CPU
    /// kernels a part gets exactly the logits a pass of its own gives.
    fn pass(&mut self, parts: &[SequencePass<'_>]) -> Result<Vec<Tensor>> {
        self.check_parts(parts)?;
        let rows: usize = parts.iter().map(|p| p.tokens.len()).sum();
        self.cover_rope_positions(parts.iter().map(|p| p.pos + p.tokens.len()).max().unwrap_or(0))?;
        let table = self.gpu_pass_table(parts)?;
        // Our CPU attention and the GPU's pass attention read only the positions a row may see; candle's route
        // needs the mask.
        let on_cpu = self.device.is_cpu();
        let needs_mask = |p: &SequencePass<'_>| p.tokens.len() > 1 && !on_cpu && table.is_none();
        let masks = parts
            .iter()
            .map(|p| if needs_mask(p) { self.mask(p.tokens.len(), p.pos).map(Some) } else { Ok(None) })
            .collect::<Result<Vec<_>>>()?;
        let (cos, sin) = match parts {
            [part] => (self.cos.narrow(0, part.pos, rows)?, self.sin.narrow(0, part.pos, rows)?),
            _ => {
                let positions: Vec<u32> =
                    parts.iter().flat_map(|p| (p.pos..p.pos + p.tokens.len()).map(|i| i as u32)).collect();
                let positions = Tensor::new(positions.as_slice(), &self.device)?;
                (self.cos.index_select(&positions, 0)?, self.sin.index_select(&positions, 0)?)
            }
        };
        let shape = PassShape { parts, rows, cos, sin, masks, table, on_cpu };
        let tokens: Vec<u32> = parts.iter().flat_map(|p| p.tokens.iter().copied()).collect();
        let ids = Tensor::new(tokens.as_slice(), &self.device)?.unsqueeze(0)?;
        let mut x = self.embedding.lookup(&ids)?; // [1, rows, hidden]
        let (c, ours) = (&self.config, self.gpu_fused);
        // Each block's output waits here to be added to the residual stream together with the next norm.
        let mut pending: Option<Tensor> = None;
        for (index, layer) in self.layers.iter().enumerate() {
            let h = add_and_norm(&mut x, pending.take(), &layer.attn_norm, c.rms_eps, ours)?;
            let qkv: [Tensor; 3] = layer.qkv.forward(&h)?.try_into().map_err(|_| parts_error("qkv"))?;
            let attn = shape.attention(index, qkv, c, &mut self.sequences)?;
            let h = add_and_norm(&mut x, Some(layer.wo.forward(&attn)?), &layer.ffn_norm, c.rms_eps, ours)?;
            pending = Some(match rows {
                // A long pass on the CPU runs the feed-forward block a slice of rows at a time: its intermediates
                // (four `[rows, ffn]` f32 tensors) set the prompt's peak memory, and each row is computed alone,
                // so the outputs do not change.
                rows if on_cpu && rows > FFN_ROWS_AT_ONCE => {
                    let slices = (0..rows)
                        .step_by(FFN_ROWS_AT_ONCE)
                        .map(|start| layer.feed_forward(&h.narrow(1, start, FFN_ROWS_AT_ONCE.min(rows - start))?, ours))
                        .collect::<Result<Vec<_>>>()?;
                    Tensor::cat(&slices, 1)?
                }
                _ => layer.feed_forward(&h, ours)?,
            });
        }
        if let Some(delta) = pending {
            x = (x + delta)?;
        }
        // Only the rows whose logits are wanted go through the (wide) output projection.
        let mut wanted = Vec::new();
        let mut row = 0;
        for part in parts {
            let n = part.tokens.len();
            wanted.extend(if part.every_position { row..row + n } else { row + n - 1..row + n }.map(|r| r as u32));
            row += n;
        }
        let x = match wanted.as_slice() {
            all if all.len() == rows => x,
            [one] => x.narrow(1, *one as usize, 1)?,
            some => x.index_select(&Tensor::new(some, &self.device)?, 1)?,
        };
        let x = candle_nn::ops::rms_norm(&x, &self.norm, c.rms_eps)?;
        let logits = self.output.forward(&x)?.to_dtype(DType::F32)?.squeeze(0)?; // [wanted rows, n_logits]
        let mut out = Vec::with_capacity(parts.len());
        let mut offset = 0;
        for part in parts {
            if part.every_position {
                out.push(logits.narrow(0, offset, part.tokens.len())?);
                offset += part.tokens.len();
            } else {
                out.push(logits.get(offset)?);
                offset += 1;
            }
        }
        Ok(out)
    }

    /// Runs `pass` and keeps each sequence's token ids in step with its cache.
    fn forward_parts(&mut self, parts: &[SequencePass<'_>]) -> Result<Vec<Tensor>> {
        let result = self.pass(parts);
        for part in parts {
            let Some(slots) = self.sequences.get_mut(&part.sequence) else { continue };
            if result.is_ok() {
                let history = &mut slots.active_mut().tokens;
                history.truncate(part.pos);
                history.extend_from_slice(part.tokens);
            } else {
                // A pass that failed part-way may have filled some layers' caches and not others.
                slots.clear_all();
            }
        }
        result
    }

    /// `forward_parts` on the current sequence alone.
    fn forward_current(&mut self, tokens: &[u32], pos: usize, every_position: bool) -> Result<Tensor> {
        let part = SequencePass { sequence: self.current, tokens, pos, every_position };
        let mut logits = self.forward_parts(&[part])?;
        Ok(logits.remove(0))
    }
}

impl MultiSequence for Qwen2 {
    fn open_sequence(&mut self) -> SequenceId {
        let id = self.next_sequence;
        self.next_sequence += 1;
        self.sequences.insert(id, CacheSlots::new(KV_SLOTS, self.layers.len()));
        id
    }

    fn close_sequence(&mut self, sequence: SequenceId) {
        if sequence != OWN_SEQUENCE {
            self.sequences.remove(&sequence);
            if self.current == sequence {
                self.current = OWN_SEQUENCE;
            }
        }
    }

    fn use_sequence(&mut self, sequence: SequenceId) -> Result<()> {
        if !self.sequences.contains_key(&sequence) {
            return Err(candle_core::Error::Msg(format!("sequence {sequence} is not open")).into());
        }
        self.current = sequence;
        Ok(())
    }

    fn forward_sequences(&mut self, parts: &[SequencePass<'_>]) -> Result<Vec<Tensor>> {
        self.forward_parts(parts)
    }
}

impl LanguageModel for Qwen2 {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        self.forward_current(tokens, pos, false)
    }

    fn forward_all(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        self.forward_current(tokens, pos, true)
    }

    fn batched_logits(&self) -> bool {
        true
    }

    fn exact_batches(&self) -> bool {
        self.exact_batches
    }

    fn multi_sequence(&mut self) -> Option<&mut dyn MultiSequence> {
        Some(self)
    }

    fn select_cache_for(&mut self, prompt: &[u32]) {
        self.caches_mut().select_for(prompt);
        if let Err(e) = self.borrow_prefix(prompt) {
            // The slot is left empty (or as it was): the prompt is then computed, not copied.
            tracing::warn!(error = %e, "copying a cached prefix from another sequence failed");
        }
    }

    fn cached_tokens(&self) -> &[u32] {
        &self.caches().active().tokens
    }

    fn clear_kv_cache(&mut self) {
        self.caches_mut().clear_all();
    }

    fn export_kv(&self, len: usize) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        self.caches().active().prefix(len)
    }

    fn import_kv(&mut self, snapshot: &KvSnapshot) -> Result<bool> {
        let c = &self.config;
        let expected = [1, c.n_kv_head, snapshot.tokens.len(), c.head_dim];
        let fits = snapshot.layers.len() == self.layers.len()
            && snapshot.layers.iter().all(|(k, v)| k.dims() == expected && v.dims() == expected);
        if !fits || snapshot.tokens.is_empty() {
            return Ok(false);
        }
        let (device, context) = (self.device.clone(), c.context_length);
        self.caches_mut().active_mut().replace(&snapshot.layers, &snapshot.tokens, &device, context)?;
        Ok(true)
    }

    fn n_logits(&self) -> usize {
        self.n_logits
    }

    fn context_length(&self) -> usize {
        self.config.context_length
    }
}

/// What every layer of one pass shares: its parts, their RoPE rows and masks, and where attention runs.
struct PassShape<'a, 'b> {
    parts: &'a [SequencePass<'b>],
    /// All parts' new tokens.
    rows: usize,
    /// RoPE rows for each new token's position, `[rows, head_dim / 2]`.
    cos: Tensor,
    sin: Tensor,
    /// Each part's causal mask, where candle's attention route needs one.
    masks: Vec<Option<Tensor>>,
    /// The caches as the GPU's pass attention reads them, when it takes this pass.
    table: Option<PassTable>,
    on_cpu: bool,
}

impl PassShape<'_, '_> {
    /// One layer's attention: each part's new rows attend over its own sequence's cache, which takes their keys
    /// and values first. `[1, rows, n_head * head_dim]`, the parts' rows in order.
    fn attention(
        &self,
        layer: usize,
        [q, k, v]: [Tensor; 3],
        c: &Qwen2Config,
        sequences: &mut HashMap<SequenceId, CacheSlots>,
    ) -> Result<Tensor> {
        let (rows, scale) = (self.rows, 1.0 / (c.head_dim as f64).sqrt());
        if let Some(table) = &self.table {
            // Rows stay `[1, rows, heads, head_dim]`: the kernels read them so and write attention in the layout
            // the output projection takes.
            let rows_of = |t: Tensor, n: usize| t.reshape((1, rows, n, c.head_dim))?.contiguous();
            let q = candle_nn::rotary_emb::rope_thd(&rows_of(q, c.n_head)?, &self.cos, &self.sin)?;
            let k = candle_nn::rotary_emb::rope_thd(&rows_of(k, c.n_kv_head)?, &self.cos, &self.sin)?;
            let attn = table.attend(layer, &q, &k, &rows_of(v, c.n_kv_head)?, scale as f32)?;
            for part in self.parts {
                let slots = sequences.get_mut(&part.sequence).expect("checked by check_parts");
                slots.active_mut().layers[layer].advance(part.tokens.len());
            }
            return Ok(attn);
        }
        let heads = |t: Tensor, n: usize| -> candle_core::Result<Tensor> {
            t.reshape((1, rows, n, c.head_dim))?.transpose(1, 2)?.contiguous()
        };
        let q = candle_nn::rotary_emb::rope(&heads(q, c.n_head)?, &self.cos, &self.sin)?;
        let k = candle_nn::rotary_emb::rope(&heads(k, c.n_kv_head)?, &self.cos, &self.sin)?;
        let v = heads(v, c.n_kv_head)?;
        let mut outputs = Vec::with_capacity(self.parts.len());
        let mut row = 0;
        for (part, mask) in self.parts.iter().zip(&self.masks) {
            let n = part.tokens.len();
            // A part's rows of `[1, heads, rows, head_dim]`.
            let own_rows =
                |t: &Tensor| if self.parts.len() == 1 { Ok(t.clone()) } else { t.narrow(2, row, n)?.contiguous() };
            let slots = sequences.get_mut(&part.sequence).expect("checked by check_parts");
            let cache = &mut slots.active_mut().layers[layer];
            cache.truncate(part.pos);
            let (keys, values) = cache.append(&own_rows(&k)?, &own_rows(&v)?, c.context_length)?;
            let q = own_rows(&q)?;
            outputs.push(if self.on_cpu {
                causal_attention(&q, &keys, &values, part.pos, scale as f32)?
            } else {
                candle_attention(&q, &keys, &values, mask.as_ref(), scale)?
            });
            row += n;
        }
        Ok(if outputs.len() == 1 { outputs.remove(0) } else { Tensor::cat(&outputs, 1)? })
    }
}

/// A stacked projection returned another number of parts than the model has (a bug, not bad input).
fn parts_error(what: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!("the {what} projection returned the wrong number of parts"))
}

/// Positions the RoPE tables are built for at a time: a model's full context (32768 for Qwen2.5) would take 8 to
/// 17 MiB that most runs never touch.
const ROPE_GROWTH: usize = 4096;

/// RoPE cos/sin tables for the NeoX layout (halves rotated), `[context, head_dim / 2]`.
fn rope_tables(head_dim: usize, base: f32, context: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let inv_freq: Vec<f32> = (0..head_dim / 2).map(|i| 1.0 / base.powf(2.0 * i as f32 / head_dim as f32)).collect();
    let inv_freq = Tensor::from_vec(inv_freq, (1, head_dim / 2), device)?;
    let positions = Tensor::arange(0u32, context as u32, device)?.to_dtype(DType::F32)?.reshape((context, 1))?;
    let angles = positions.broadcast_mul(&inv_freq)?;
    Ok((angles.cos()?, angles.sin()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Growing the tables must not move a position's values: a table for fewer positions is the start of a
    /// longer one, bit for bit.
    #[test]
    fn a_grown_rope_table_starts_with_the_shorter_one() {
        let (short_cos, short_sin) = rope_tables(64, 1_000_000.0, 37, &Device::Cpu).unwrap();
        let (long_cos, long_sin) = rope_tables(64, 1_000_000.0, ROPE_GROWTH + 5, &Device::Cpu).unwrap();
        let bits = |t: &Tensor| {
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(bits(&short_cos), bits(&long_cos.narrow(0, 0, 37).unwrap()));
        assert_eq!(bits(&short_sin), bits(&long_sin.narrow(0, 0, 37).unwrap()));
        assert_eq!(long_cos.dims(), &[ROPE_GROWTH + 5, 32]);
    }
}
