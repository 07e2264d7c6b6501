//! Tiny synthetic GGUF models with random weights, written by the tests themselves: fast loader and
//! generation-mechanics tests without downloading anything.
#![allow(dead_code)]

use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// Shape and content choices for a tiny Qwen2 file.
#[derive(Debug, Clone)]
pub struct TinyQwen2 {
    pub hidden: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub ffn: usize,
    pub n_layer: usize,
    /// Type of the big matrices (Q8_0, Q5_0, Q4_K…); norms and biases stay F32.
    pub matrix_type: GgmlDType,
    /// Give the model its own `output.weight` (else tied to the embedding).
    pub separate_output: bool,
    pub architecture: String,
    /// Metadata keys to leave out.
    pub omit_keys: Vec<String>,
    /// `context_length`.
    pub context: usize,
    pub seed: u64,
}

impl Default for TinyQwen2 {
    fn default() -> Self {
        Self {
            hidden: 64,
            n_head: 4,
            n_kv_head: 2,
            ffn: 128,
            n_layer: 2,
            matrix_type: GgmlDType::Q8_0,
            separate_output: true,
            architecture: "qwen2".into(),
            omit_keys: Vec::new(),
            context: 256,
            seed: 1,
        }
    }
}

/// The vocabulary of the tiny models: the 256 byte tokens, a few merged tokens, then specials.
pub fn tiny_vocab() -> (Vec<String>, Vec<i32>, Vec<String>) {
    let chars = tandem::llm::tokenizer::gpt2_byte_to_char();
    let mut tokens: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
    let mut types = vec![1i32; 256];
    let space = chars[b' ' as usize];
    let merges = vec![format!("{space} t"), "t h".to_string(), format!("{space}t h")];
    for merged in [format!("{space}t"), "th".to_string(), format!("{space}th")] {
        tokens.push(merged);
        types.push(1);
    }
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(special.to_string());
        types.push(3);
    }
    (tokens, types, merges)
}

pub fn random(shape: &[usize], seed: u64, scale: f64) -> Tensor {
    // A cheap deterministic pseudo-random fill (xorshift), so files are identical run to run.
    let n: usize = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let values: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) as f32 * scale as f32
        })
        .collect();
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

/// Writes a tiny Qwen2-shaped GGUF file to `path`.
pub fn write_tiny_qwen2(path: &Path, spec: &TinyQwen2) {
    let (tokens, types, merges) = tiny_vocab();
    let vocab = tokens.len();
    let head_dim = spec.hidden / spec.n_head;
    let kv_dim = head_dim * spec.n_kv_head;
    let mut seed = spec.seed;
    let mut next = |shape: &[usize], scale: f64| {
        seed += 1;
        random(shape, seed, scale)
    };
    let q = |t: Tensor, dtype: GgmlDType| QTensor::quantize(&t, dtype).unwrap();
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    tensors.push(("token_embd.weight".into(), q(next(&[vocab, spec.hidden], 1.0), GgmlDType::Q8_0)));
    if spec.separate_output {
        tensors.push(("output.weight".into(), q(next(&[vocab, spec.hidden], 0.5), spec.matrix_type)));
    }
    tensors.push(("output_norm.weight".into(), q(next(&[spec.hidden], 0.1).affine(1.0, 1.0).unwrap(), GgmlDType::F32)));
    for i in 0..spec.n_layer {
        let mut add = |name: &str, t: QTensor| tensors.push((format!("blk.{i}.{name}"), t));
        add("attn_norm.weight", q(next(&[spec.hidden], 0.1).affine(1.0, 1.0).unwrap(), GgmlDType::F32));
        add("ffn_norm.weight", q(next(&[spec.hidden], 0.1).affine(1.0, 1.0).unwrap(), GgmlDType::F32));
        add("attn_q.weight", q(next(&[spec.hidden, spec.hidden], 0.3), spec.matrix_type));
        add("attn_k.weight", q(next(&[kv_dim, spec.hidden], 0.3), spec.matrix_type));
        add("attn_v.weight", q(next(&[kv_dim, spec.hidden], 0.3), spec.matrix_type));
        add("attn_q.bias", q(next(&[spec.hidden], 0.1), GgmlDType::F32));
        add("attn_k.bias", q(next(&[kv_dim], 0.1), GgmlDType::F32));
        add("attn_v.bias", q(next(&[kv_dim], 0.1), GgmlDType::F32));
        add("attn_output.weight", q(next(&[spec.hidden, spec.hidden], 0.3), spec.matrix_type));
        add("ffn_gate.weight", q(next(&[spec.ffn, spec.hidden], 0.3), spec.matrix_type));
        add("ffn_up.weight", q(next(&[spec.ffn, spec.hidden], 0.3), spec.matrix_type));
        add("ffn_down.weight", q(next(&[spec.hidden, spec.ffn], 0.3), spec.matrix_type));
    }
    let arch = spec.architecture.as_str();
    let string_array = |v: &[String]| Value::Array(v.iter().map(|s| Value::String(s.clone())).collect());
    let metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        ("general.name".into(), Value::String("tiny test model".into())),
        (format!("{arch}.block_count"), Value::U32(spec.n_layer as u32)),
        (format!("{arch}.context_length"), Value::U32(spec.context as u32)),
        (format!("{arch}.embedding_length"), Value::U32(spec.hidden as u32)),
        (format!("{arch}.feed_forward_length"), Value::U32(spec.ffn as u32)),
        (format!("{arch}.attention.head_count"), Value::U32(spec.n_head as u32)),
        (format!("{arch}.attention.head_count_kv"), Value::U32(spec.n_kv_head as u32)),
        (format!("{arch}.rope.freq_base"), Value::F32(10000.0)),
        (format!("{arch}.attention.layer_norm_rms_epsilon"), Value::F32(1e-6)),
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String("qwen2".into())),
        ("tokenizer.ggml.tokens".into(), string_array(&tokens)),
        ("tokenizer.ggml.token_type".into(), Value::Array(types.iter().map(|&t| Value::I32(t)).collect())),
        ("tokenizer.ggml.merges".into(), string_array(&merges)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(vocab as u32 - 1)),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(vocab as u32 - 3)),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
    ];
    let metadata: Vec<(&str, &Value)> =
        metadata.iter().filter(|(k, _)| !spec.omit_keys.contains(k)).map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &metadata, &tensors).unwrap();
}
