//! What sets one decoder-only architecture apart from another, as data: the per-family table (RoPE layout,
//! activation, which layers rotate or slide) and the hyper-parameters read from the file's `<arch>.*` metadata.
//!
//! Everything a file's tensors can say (biases, q/k norms, fused projections, post-norms, RoPE frequency factors)
//! is read from the tensors present, not from this table: the table holds only what a file does not say.

use super::rope::{RopeLayout, RopeSpec, YarnRamp};
use crate::llm::gguf::{GgufFile, LoadError};

/// The feed-forward block's gate activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `silu(gate) * up` (Llama, Qwen, Phi, SmolLM).
    Silu,
    /// `gelu_tanh(gate) * up` (Gemma).
    GeluTanh,
}

/// Which layers rotate their queries and keys, and which attend within a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerPattern {
    /// Every layer rotates and attends over the whole context.
    Uniform,
    /// Every `n`th layer (1-based) has no RoPE at all (SmolLM3's "NoPE" layers).
    NoRopeEvery(usize),
    /// Every `n`th layer (1-based) is global; the others attend within `<arch>.attention.sliding_window` and
    /// rotate with the local base (Gemma 3).
    GlobalEvery(usize),
}

/// One architecture's fixed traits (by `general.architecture`).
#[derive(Debug)]
pub struct Family {
    pub architecture: &'static str,
    /// How RoPE pairs a head's values: llama.cpp's converter permutes Llama's q/k rows so that adjacent values pair.
    pub rope_layout: RopeLayout,
    pub activation: Activation,
    /// Token embeddings are scaled by `sqrt(hidden)` (Gemma).
    pub scale_embeddings: bool,
    pub layers: LayerPattern,
    /// The RoPE base when the file gives none.
    pub default_rope_base: f32,
    /// The RoPE base of sliding-window layers (Gemma 3: 10,000, fixed by the architecture, not in the file).
    pub local_rope_base: f32,
}

/// The architectures the decoder runs. Llama covers Llama 2/3.x, Mistral, TinyLlama and SmolLM2 (all written as
/// `llama`); Phi-3 covers Phi-3 and Phi-4-mini.
pub const FAMILIES: &[Family] = &[
    Family {
        architecture: "qwen2",
        rope_layout: RopeLayout::Halves,
        activation: Activation::Silu,
        scale_embeddings: false,
        layers: LayerPattern::Uniform,
        default_rope_base: 1_000_000.0,
        local_rope_base: 0.0,
    },
    Family {
        architecture: "qwen3",
        rope_layout: RopeLayout::Halves,
        activation: Activation::Silu,
        scale_embeddings: false,
        layers: LayerPattern::Uniform,
        default_rope_base: 1_000_000.0,
        local_rope_base: 0.0,
    },
    Family {
        architecture: "llama",
        rope_layout: RopeLayout::Adjacent,
        activation: Activation::Silu,
        scale_embeddings: false,
        layers: LayerPattern::Uniform,
        default_rope_base: 10_000.0,
        local_rope_base: 0.0,
    },
    Family {
        architecture: "smollm3",
        rope_layout: RopeLayout::Adjacent,
        activation: Activation::Silu,
        scale_embeddings: false,
        layers: LayerPattern::NoRopeEvery(4),
        default_rope_base: 10_000.0,
        local_rope_base: 0.0,
    },
    Family {
        architecture: "phi3",
        rope_layout: RopeLayout::Halves,
        activation: Activation::Silu,
        scale_embeddings: false,
        layers: LayerPattern::Uniform,
        default_rope_base: 10_000.0,
        local_rope_base: 0.0,
    },
    Family {
        architecture: "gemma3",
        rope_layout: RopeLayout::Halves,
        activation: Activation::GeluTanh,
        scale_embeddings: true,
        layers: LayerPattern::GlobalEvery(6),
        default_rope_base: 1_000_000.0,
        local_rope_base: 10_000.0,
    },
];

/// The family of `architecture`, if the decoder runs it.
pub fn family(architecture: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.architecture == architecture)
}

/// Hyper-parameters read from `<arch>.*` metadata.
#[derive(Debug, Clone)]
pub struct DecoderConfig {
    pub family: &'static Family,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub hidden: usize,
    /// Values per query/key head (`attention.key_length`, else `hidden / n_head`).
    pub head_dim: usize,
    pub context_length: usize,
    pub rms_eps: f32,
    /// The global (or only) RoPE.
    pub rope: RopeSpec,
    /// Sliding-window layers' RoPE and window, where the family has them.
    pub local: Option<(RopeSpec, usize)>,
    /// Multiplies the attention scores.
    pub attention_scale: f32,
}

/// What each layer does differently from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerKind {
    /// Whether queries and keys are rotated, and with which RoPE (`false`: the global one).
    pub rotates: bool,
    /// Attends within this many positions (its own included) instead of the whole context; local RoPE.
    pub window: Option<usize>,
}

impl DecoderConfig {
    /// Reads the hyper-parameters of a file whose architecture is `family`'s.
    pub fn from_gguf(file: &GgufFile, family: &'static Family) -> Result<Self, LoadError> {
        let arch = family.architecture;
        let key = |k: &str| format!("{arch}.{k}");
        let hidden = file.usize(&key("embedding_length"))?;
        let n_head = file.usize(&key("attention.head_count"))?;
        let n_kv_head = file.usize(&key("attention.head_count_kv")).unwrap_or(n_head);
        let bad = |message: String| LoadError::BadHeader { path: file.path().to_path_buf(), message };
        if n_head == 0 || n_kv_head == 0 || n_head % n_kv_head != 0 {
            return Err(bad(format!("inconsistent head counts: heads {n_head}, kv heads {n_kv_head}")));
        }
        let head_dim = match file.usize(&key("attention.key_length")) {
            Ok(length) => length,
            Err(_) if hidden % n_head == 0 => hidden / n_head,
            Err(_) => return Err(bad(format!("hidden {hidden} is not a multiple of {n_head} heads"))),
        };
        let rotary = file.usize(&key("rope.dimension_count")).unwrap_or(head_dim);
        if rotary > head_dim || !rotary.is_multiple_of(2) || !head_dim.is_multiple_of(2) {
            return Err(bad(format!("RoPE over {rotary} of {head_dim} values per head")));
        }
        let mut context_length = file.usize(&key("context_length")).unwrap_or(4096);
        let original = file.usize(&key("rope.scaling.original_context_length")).ok();
        let base = file.f32(&key("rope.freq_base")).unwrap_or(family.default_rope_base);
        let factor = file.f32(&key("rope.scaling.factor")).unwrap_or(1.0);
        let attention_factor = file.f32(&key("rope.scaling.attn_factor")).unwrap_or(1.0);
        // Phi-3's LongRoPE: short and long frequency factors. As llama.cpp does, the long ones rotate every
        // position where the context is longer than the original length (the file's context is the run's), the
        // short ones otherwise; with short factors only, the context stops at the original length, so a sequence
        // never outgrows them.
        let long_factors = file.has_tensor("rope_factors_long.weight");
        let short_factors = file.has_tensor("rope_factors_short.weight");
        let longrope = match original {
            Some(original) if long_factors && context_length > original => Some("rope_factors_long.weight"),
            Some(original) if short_factors => {
                context_length = context_length.min(original);
                Some("rope_factors_short.weight")
            }
            _ if short_factors => Some("rope_factors_short.weight"),
            _ => None,
        };
        // Scaling as llama.cpp applies it to these families: linear slows every frequency by the factor; YaRN
        // slows only the slow ones (a ramp between) and scales cos and sin by 1 + 0.1·ln(factor); LongRoPE is the
        // factor tensors above. Another scaling is not applied: unscaled positions past the length the model was
        // trained at give garbage, so the context stops there, and the load says so.
        let (position_scale, yarn, attention_factor) = match file.string(&key("rope.scaling.type")) {
            Ok("linear") => (1.0 / factor, None, attention_factor),
            Ok("yarn") => {
                let ramp = YarnRamp::new(rotary, original.unwrap_or(context_length), base);
                let magnitude = if factor > 1.0 { 1.0 + 0.1 * factor.ln() } else { 1.0 };
                (1.0 / factor, Some(ramp), attention_factor * magnitude)
            }
            Ok("longrope") if longrope.is_some() => (1.0, None, attention_factor),
            Ok(kind) if kind != "none" => {
                let kept = original.unwrap_or(context_length).min(context_length);
                if kept < context_length {
                    tracing::warn!(
                        "{}: RoPE scaling '{kind}' is not applied (linear, yarn and longrope are): the context is kept \
                         at the {kept} tokens the model was trained at, not the {context_length} the file allows with \
                         it",
                        file.path().display()
                    );
                }
                context_length = kept;
                (1.0, None, attention_factor)
            }
            _ => (1.0, None, attention_factor),
        };
        let rope = RopeSpec {
            base,
            rotary,
            layout: family.rope_layout,
            position_scale,
            yarn,
            // llama.cpp takes Llama 3's `rope_freqs` before LongRoPE's.
            factors: if file.has_tensor("rope_freqs.weight") { Some("rope_freqs.weight") } else { longrope },
            attention_factor,
        };
        let local = match family.layers {
            LayerPattern::GlobalEvery(_) => {
                let window = file.usize(&key("attention.sliding_window"))?;
                let local_rope = RopeSpec {
                    base: family.local_rope_base,
                    position_scale: 1.0,
                    yarn: None,
                    factors: None,
                    attention_factor: 1.0,
                    ..rope.clone()
                };
                Some((local_rope, window))
            }
            _ => None,
        };
        let n_layer = file.usize(&key("block_count"))?;
        // Gemma 3 27B scales queries by `hidden / heads` rather than the head width (llama.cpp keys it on the
        // model's size; its 62 layers are the one Gemma 3 with that shape).
        let query_width = if arch == "gemma3" && n_layer == 62 { hidden / n_head } else { head_dim };
        Ok(Self {
            family,
            n_layer,
            n_head,
            n_kv_head,
            hidden,
            head_dim,
            context_length,
            rms_eps: file.f32(&key("attention.layer_norm_rms_epsilon")).unwrap_or(1e-6),
            rope,
            local,
            attention_scale: 1.0 / (query_width as f32).sqrt(),
        })
    }

    /// Layer `index`'s kind.
    pub fn layer_kind(&self, index: usize) -> LayerKind {
        match self.family.layers {
            LayerPattern::Uniform => LayerKind { rotates: true, window: None },
            LayerPattern::NoRopeEvery(n) => LayerKind { rotates: !(index + 1).is_multiple_of(n), window: None },
            LayerPattern::GlobalEvery(n) => LayerKind {
                rotates: true,
                window: if (index + 1).is_multiple_of(n) { None } else { self.local.as_ref().map(|(_, w)| *w) },
            },
        }
    }
}
