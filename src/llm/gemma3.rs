//! Gemma 3 from GGUF, through candle-transformers' `quantized_gemma3` (used here as a small base model for
//! tests and model pairs; the hot path work goes into `qwen2`).

use std::io::Cursor;

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::quantized_gemma3::ModelWeights;

use super::gguf::{GgufFile, LoadError};
use super::LanguageModel;
use crate::Result;

/// Metadata keys candle's loader reads without a default: checked first so a missing one is named.
const REQUIRED_KEYS: &[&str] = &[
    "gemma3.attention.head_count",
    "gemma3.attention.head_count_kv",
    "gemma3.block_count",
    "gemma3.embedding_length",
    "gemma3.attention.layer_norm_rms_epsilon",
];

/// A loaded Gemma 3 model. candle's implementation keeps its own cache and has no rewind, so a forward at a
/// position before the cached end replays the kept tokens from position 0.
pub struct Gemma3 {
    weights: ModelWeights,
    n_logits: usize,
    context_length: usize,
    /// Tokens currently in candle's cache, in order.
    history: Vec<u32>,
    device: Device,
}

impl Gemma3 {
    /// Builds the model from a GGUF file whose architecture is `gemma3`.
    pub fn load(file: &GgufFile, device: &Device) -> Result<Self> {
        for key in REQUIRED_KEYS {
            file.usize(key).or_else(|_| file.f32(key).map(|v| v as usize))?;
        }
        let (n_logits, _) = match file.content.tensor_infos.get("token_embd.weight") {
            Some(info) => info.shape.dims2()?,
            None => {
                return Err(LoadError::MissingTensor {
                    path: file.path().to_path_buf(),
                    name: "token_embd.weight".into(),
                }
                .into())
            }
        };
        let context_length = file.usize("gemma3.context_length").unwrap_or(32768);
        // candle's loader reads through `Read + Seek`: give it the mapped bytes (a second header parse is cheap).
        let mut cursor = Cursor::new(file.bytes());
        let content = gguf_file::Content::read(&mut cursor)?;
        let weights = ModelWeights::from_gguf(content, &mut cursor, device).map_err(|e| LoadError::BadTensor {
            path: file.path().to_path_buf(),
            name: "(gemma3 weights)".into(),
            message: e.to_string(),
        })?;
        Ok(Self { weights, n_logits, context_length, history: Vec::new(), device: device.clone() })
    }
}

impl LanguageModel for Gemma3 {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        if tokens.is_empty() || pos > self.history.len() {
            return Err(candle_core::Error::Msg(format!(
                "forward of {} tokens at position {pos} with {} cached",
                tokens.len(),
                self.history.len()
            ))
            .into());
        }
        let (start, input) = if pos == self.history.len() {
            (pos, tokens.to_vec())
        } else {
            // Rewind: candle's cache restarts when it sees position 0.
            let mut replay = self.history[..pos].to_vec();
            replay.extend_from_slice(tokens);
            (0, replay)
        };
        let ids = Tensor::new(input.as_slice(), &self.device)?.unsqueeze(0)?;
        let logits = self.weights.forward(&ids, start)?;
        self.history.truncate(start);
        self.history.extend_from_slice(&input);
        Ok(logits.flatten_all()?.to_dtype(DType::F32)?)
    }

    fn cached_tokens(&self) -> &[u32] {
        &self.history
    }

    fn clear_kv_cache(&mut self) {
        self.history.clear();
    }

    fn n_logits(&self) -> usize {
        self.n_logits
    }

    fn context_length(&self) -> usize {
        self.context_length
    }
}
