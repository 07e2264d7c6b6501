//! Loading a decoder from GGUF: tensors read (and slow types converted once), projections stacked or split as
//! the file has them, RoPE tables built, the model assembled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Tensor};

use super::family::{DecoderConfig, Family};
use super::gpu::ours_on_gpu;
use super::layers::{Layer, StackedLinear, TokenTable};
use super::rope::{Rope, RopeSpec, ROPE_GROWTH};
use super::{Decoder, KV_SLOTS, OWN_SEQUENCE};
use crate::kernels::QLinear;
use crate::llm::gguf::{GgufFile, LoadError};
use crate::llm::kv_cache::CacheSlots;
use crate::llm::prompt_cache::PromptCache;
use crate::llm::LoadOptions;
use crate::Result;

/// One loading thread's layers (with their indices), the output projection if it took it, and its conversion
/// counts.
type LoadedShare = (Vec<(usize, Layer)>, Option<QLinear>, usize, usize);

/// Loads tensors and converts slow types once; counts conversions for the load report.
#[derive(Clone, Copy)]
struct TensorLoader<'a> {
    file: &'a GgufFile,
    device: &'a Device,
    keep_types: bool,
    /// Q5_0/Q5_1 tensors requantized to Q8_0 for candle's kernels.
    converted: usize,
    /// Q5_0 tensors widened exactly to int8 for ours (the rest of them stay at five bits in ours).
    widened: usize,
    /// Whether `stacked` stacks matrices. By default only off the CPU: on a GPU each matmul costs launches, so
    /// fewer, larger ones decode faster, while on the CPU the stacked matrices decoded slower than separate ones
    /// (docs/performance.md, "GPU (CUDA)" and "What was tried and dropped").
    stack: bool,
}

impl TensorLoader<'_> {
    /// A vector (norm weight or bias) as f32.
    fn vector(&self, name: &str) -> Result<Tensor> {
        Ok(self.file.tensor(name, self.device)?.dequantize(self.device)?)
    }

    /// A weight matrix, on our kernels where this CPU has them: built straight from the mapped file's bytes (one
    /// copy of the model's size instead of two), else read into a `QTensor` first.
    fn matrix(&mut self, name: &str) -> Result<QLinear> {
        let (_, dims) = self.file.tensor_layout(name)?;
        if !self.keep_types && self.device.is_cpu() && dims.len() == 2 {
            let ours = self.file.read_matrix(name, |dtype, [rows, cols], bytes| {
                Ok::<_, crate::Error>(QLinear::widened_from_gguf_bytes(dtype, rows, cols, bytes)?.map(|l| (dtype, l)))
            })??;
            if let Some((dtype, ours)) = ours {
                self.count_widened(dtype, &ours);
                return Ok(ours);
            }
        }
        let tensor = self.file.tensor(name, self.device)?;
        self.linear(tensor)
    }

    /// Counts a Q5_0 matrix that our kernels took as int8.
    fn count_widened(&mut self, dtype: GgmlDType, ours: &QLinear) {
        self.widened += usize::from(dtype == GgmlDType::Q5_0 && ours.kernel_name() == "tandem-q8_0");
    }

    /// Matrices that read the same input, with their biases where the file has them: consecutive ones of the same
    /// type and width are stacked into one (see [`StackedLinear`]).
    fn stacked(&mut self, names: &[String]) -> Result<StackedLinear> {
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
                self.matrix(&names[start])?
            } else {
                let refs: Vec<&str> = names[start..end].iter().map(String::as_str).collect();
                match self.file.stacked_rows(&refs, self.device)? {
                    Some(tensor) => self.linear(tensor)?,
                    None => {
                        end = start + 1;
                        self.matrix(&names[start])?
                    }
                }
            };
            let widths: Vec<usize> = layouts[start..end].iter().map(|l| l.2).collect();
            let bias = self.biases(&names[start..end], &widths)?;
            groups.push((linear, bias, widths));
            start = end;
        }
        Ok(StackedLinear { groups })
    }

    /// One fused matrix whose output rows are `widths` parts in order (Phi-3's `attn_qkv`, `ffn_up`), with its
    /// bias where the file has one.
    fn fused(&mut self, name: &str, widths: Vec<usize>) -> Result<StackedLinear> {
        let (_, dims) = self.file.tensor_layout(name)?;
        if dims.first().copied() != Some(widths.iter().sum()) {
            return Err(LoadError::BadTensor {
                path: self.file.path().to_path_buf(),
                name: name.into(),
                message: format!("shape {dims:?}: expected {} output rows ({widths:?})", widths.iter().sum::<usize>()),
            }
            .into());
        }
        let linear = self.matrix(name)?;
        let bias_name = name.replace(".weight", ".bias");
        let bias = if self.file.has_tensor(&bias_name) { Some(self.vector(&bias_name)?) } else { None };
        Ok(StackedLinear { groups: vec![(linear, bias, widths)] })
    }

    /// The biases of matrices stacked together: None when none of them has one, else each one's (zeros for a
    /// matrix without), joined.
    fn biases(&self, names: &[String], widths: &[usize]) -> Result<Option<Tensor>> {
        let bias_names: Vec<String> = names.iter().map(|n| n.replace(".weight", ".bias")).collect();
        if !bias_names.iter().any(|b| self.file.has_tensor(b)) {
            return Ok(None);
        }
        let parts = bias_names
            .iter()
            .zip(widths)
            .map(|(b, &w)| {
                if self.file.has_tensor(b) {
                    self.vector(b)
                } else {
                    Ok(Tensor::zeros(w, candle_core::DType::F32, self.device)?)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(if parts.len() == 1 { parts[0].clone() } else { Tensor::cat(&parts, 0)? }))
    }

    /// A norm weight where the file has it.
    fn optional_vector(&self, name: &str) -> Result<Option<Tensor>> {
        if self.file.has_tensor(name) {
            Ok(Some(self.vector(name)?))
        } else {
            Ok(None)
        }
    }

    /// A loaded weight matrix as a layer: our kernels where this CPU has them (Q5_0 included), else candle's (Q5_0
    /// converted to Q8_0 on the CPU).
    fn linear(&mut self, tensor: QTensor) -> Result<QLinear> {
        if !self.keep_types {
            if let Some(ours) = QLinear::widened(&tensor)? {
                self.count_widened(tensor.dtype(), &ours);
                return Ok(ours);
            }
        }
        QLinear::new(self.convert(tensor)?)
    }

    /// Layer `i`'s norms, projections and biases: split or fused as the file has them.
    fn layer(&mut self, i: usize, config: &DecoderConfig) -> Result<Layer> {
        let name = |part: &str| format!("blk.{i}.{part}");
        let (q_width, kv_width) = (config.n_head * config.head_dim, config.n_kv_head * config.head_dim);
        let qkv = if self.file.has_tensor(&name("attn_qkv.weight")) {
            self.fused(&name("attn_qkv.weight"), vec![q_width, kv_width, kv_width])?
        } else {
            self.stacked(&[name("attn_q.weight"), name("attn_k.weight"), name("attn_v.weight")])?
        };
        let gate_up = if self.file.has_tensor(&name("ffn_gate.weight")) {
            self.stacked(&[name("ffn_gate.weight"), name("ffn_up.weight")])?
        } else {
            // Phi-3 keeps gate and up in one matrix, gate first.
            let (_, dims) = self.file.tensor_layout(&name("ffn_up.weight"))?;
            let rows = dims.first().copied().unwrap_or(0);
            self.fused(&name("ffn_up.weight"), vec![rows / 2, rows / 2])?
        };
        Ok(Layer {
            attn_norm: self.vector(&name("attn_norm.weight"))?,
            qkv,
            q_norm: self.optional_vector(&name("attn_q_norm.weight"))?,
            k_norm: self.optional_vector(&name("attn_k_norm.weight"))?,
            wo: self.matrix(&name("attn_output.weight"))?,
            attn_post_norm: self.optional_vector(&name("post_attention_norm.weight"))?,
            ffn_norm: self.vector(&name("ffn_norm.weight"))?,
            gate_up,
            down: self.matrix(&name("ffn_down.weight"))?,
            ffn_post_norm: self.optional_vector(&name("post_ffw_norm.weight"))?,
        })
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

impl Decoder {
    /// Builds the model from a GGUF file whose architecture is `family`'s.
    pub fn load(
        file: &GgufFile,
        family: &'static Family,
        device: &Device,
        options: &LoadOptions,
        conversions: &mut Vec<String>,
    ) -> Result<Self> {
        let config = DecoderConfig::from_gguf(file, family)?;
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
                message: format!(
                    "shape {dims:?}: width differs from {}.embedding_length {}",
                    family.architecture, config.hidden
                ),
            }
            .into());
        }
        // Small models tie the output projection to the embedding table. An untied table only serves lookups:
        // on the CPU it stays in the mapped file; the untied projection loads beside the layers, below.
        let separate_output = file.has_tensor("output.weight");
        let (embedding, tied) = match (separate_output, device.is_cpu()) {
            (true, true) => (TokenTable::Mapped(file.mapped_rows("token_embd.weight")?), None),
            (true, false) => {
                let table = Arc::new(file.tensor("token_embd.weight", device)?);
                (TokenTable::Loaded(QLinear::Candle(QMatMul::from_arc(table)?)), None)
            }
            (false, _) => {
                // On the CPU, ours straight from the mapped bytes where a kernel of ours takes the type.
                let ours = if device.is_cpu() {
                    file.read_matrix("token_embd.weight", |dtype, [rows, cols], bytes| {
                        QLinear::from_gguf_bytes(dtype, rows, cols, bytes)
                    })??
                } else {
                    None
                };
                let tied = match ours {
                    Some(ours) => ours,
                    None => QLinear::from_arc(Arc::new(file.tensor("token_embd.weight", device)?))?,
                };
                (TokenTable::Loaded(tied.clone()), Some(tied))
            }
        };
        // The output projection (when untied) and the layers load on the kernels' threads, each thread taking the
        // next piece as it finishes one, the projection (the largest, 191 MB on the 1.5B) first: on the CPU a load
        // is mostly repacking weights into our layouts and faulting in the mapped file, work that shares out over
        // the cores.
        let threads = if device.is_cpu() {
            (candle_core::utils::barrier_pool().n_workers() + 1).min(config.n_layer.max(1))
        } else {
            1
        };
        let pieces = config.n_layer + usize::from(separate_output);
        let next_piece = AtomicUsize::new(0);
        let layer_config = &config;
        let mut loaded: Vec<Result<LoadedShare>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let mut loader = TensorLoader { converted: 0, widened: 0, ..loader };
                    let next_piece = &next_piece;
                    scope.spawn(move || {
                        let (mut mine, mut output) = (Vec::new(), None);
                        loop {
                            let piece = next_piece.fetch_add(1, Ordering::Relaxed);
                            match piece.checked_sub(usize::from(separate_output)) {
                                _ if piece >= pieces => break,
                                None => output = Some(loader.matrix("output.weight")?),
                                Some(i) => mine.push((i, loader.layer(i, layer_config)?)),
                            }
                        }
                        Ok((mine, output, loader.converted, loader.widened))
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("a layer-loading thread panicked")).collect()
        });
        let mut layers: Vec<(usize, Layer)> = Vec::with_capacity(config.n_layer);
        let mut output = tied;
        for result in loaded.drain(..) {
            let (mine, own_output, converted, widened) = result?;
            layers.extend(mine);
            output = output.or(own_output);
            loader.converted += converted;
            loader.widened += widened;
        }
        let output = output.expect("the output projection is tied or loaded as a piece");
        layers.sort_by_key(|(i, _)| *i);
        let layers: Vec<Layer> = layers.into_iter().map(|(_, layer)| layer).collect();
        if loader.converted > 0 {
            conversions.push(format!("Q5_0/Q5_1→Q8_0: {} tensors", loader.converted));
        }
        if loader.widened > 0 {
            conversions.push(format!("Q5_0→int8 (exact, tandem kernel): {} tensors", loader.widened));
        }
        let norm = loader.vector("output_norm.weight")?;
        let rope_for = |spec: &RopeSpec| -> Result<Rope> {
            let factors = match spec.factors {
                Some(name) => Some(loader.vector(name)?.to_vec1::<f32>()?),
                None => None,
            };
            if factors.as_ref().is_some_and(|f| f.len() != spec.rotary / 2) {
                return Err(LoadError::BadTensor {
                    path: file.path().to_path_buf(),
                    name: spec.factors.unwrap_or_default().into(),
                    message: format!("expected {} frequency factors", spec.rotary / 2),
                }
                .into());
            }
            Rope::new(spec.clone(), factors, ROPE_GROWTH.min(config.context_length), device)
        };
        let rope = rope_for(&config.rope)?;
        let local_rope = config.local.as_ref().map(|(spec, _)| rope_for(spec)).transpose()?;
        let n_layer = config.n_layer;
        // Norms, RoPE, biases and activations work on each row alone; the products and attention decide.
        let ours = |linear: &QLinear| linear.kernel_name() != "candle";
        let (gpu_attention, gpu_fused) = ours_on_gpu(device);
        // Sliding-window layers attend through candle's ops once a pass outgrows the window (see `pass`).
        let exact_batches = device.is_cpu()
            && config.local.is_none()
            && ours(&output)
            && layers
                .iter()
                .all(|l| ours(&l.wo) && ours(&l.down) && l.qkv.linears().all(ours) && l.gate_up.linears().all(ours));
        // The GPU's pass attention rotates in the halves layout over whole heads, and knows no windows or q/k norms.
        let plain = config.rope.layout == super::rope::RopeLayout::Halves
            && config.rope.rotary == config.head_dim
            && config.local.is_none()
            && (0..n_layer).all(|i| config.layer_kind(i).rotates)
            && layers.iter().all(|l| l.q_norm.is_none());
        let embedding_scale = family.scale_embeddings.then(|| (config.hidden as f64).sqrt());
        Ok(Self {
            config,
            embedding,
            embedding_scale,
            layers,
            norm,
            output,
            n_logits,
            rope,
            local_rope,
            masks: HashMap::new(),
            sequences: HashMap::from([(OWN_SEQUENCE, CacheSlots::new(KV_SLOTS, n_layer))]),
            prompt_cache: PromptCache::new(options.prompt_cache_bytes),
            current: OWN_SEQUENCE,
            next_sequence: OWN_SEQUENCE + 1,
            device: device.clone(),
            exact_batches,
            gpu_attention: gpu_attention && plain,
            gpu_fused,
        })
    }
}
