//! One forward pass over the new tokens of one or more sequences: checks, RoPE rows and masks, the layers, and
//! attention over each sequence's own cache.

use std::collections::{HashMap, HashSet};

use candle_core::{DType, Module, Tensor};

use super::gpu::PassTable;
use super::layers::{add_and_norm, parts_error};
use super::rope::{rope_tables, ROPE_GROWTH};
use super::{Qwen2, Qwen2Config, FFN_ROWS_AT_ONCE};
use crate::kernels::attention::{candle_attention, causal_attention};
use crate::llm::kv_cache::CacheSlots;
use crate::llm::{SequenceId, SequencePass};
use crate::Result;

impl Qwen2 {
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
    /// per sequence). Returns each part's logits: its last position's, `[n_logits]`, or with `logits_from` those of
    /// the positions from there on, `[tokens - first, n_logits]`. Every product and our attention compute a row
    /// alone, so on our CPU kernels a part gets exactly the logits a pass of its own gives. With `narrow`, the pass
    /// of one part wanting one row's logits computes only those of the given token ids, into the given buffer
    /// (`[n_logits]`), and returns no tensor.
    fn pass(&mut self, parts: &[SequencePass<'_>], narrow: Option<NarrowLogits<'_>>) -> Result<Vec<Tensor>> {
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
        // Each part's count of wanted rows, for cutting the logits apart below.
        let mut counts = Vec::with_capacity(parts.len());
        let mut row = 0;
        for part in parts {
            let n = part.tokens.len();
            let first = part.logits_from.map_or(n - 1, |first| first.min(n - 1));
            wanted.extend((row + first..row + n).map(|r| r as u32));
            counts.push(n - first);
            row += n;
        }
        let x = match wanted.as_slice() {
            all if all.len() == rows => x,
            [one] => x.narrow(1, *one as usize, 1)?,
            some => x.index_select(&Tensor::new(some, &self.device)?, 1)?,
        };
        let x = candle_nn::ops::rms_norm(&x, &self.norm, c.rms_eps)?;
        if let Some((rows, out)) = narrow {
            if wanted.len() != 1 {
                return Err(crate::Error::Internal(format!("a narrowed pass wants {} rows' logits", wanted.len())));
            }
            self.output.forward_rows(&x, rows, out)?;
            return Ok(Vec::new());
        }
        let logits = self.output.forward(&x)?.to_dtype(DType::F32)?.squeeze(0)?; // [wanted rows, n_logits]
        let mut out = Vec::with_capacity(parts.len());
        let mut offset = 0;
        for (part, n) in parts.iter().zip(counts) {
            out.push(if part.logits_from.is_some() { logits.narrow(0, offset, n)? } else { logits.get(offset)? });
            offset += n;
        }
        Ok(out)
    }

    /// Runs `pass` and keeps each sequence's token ids in step with its cache.
    pub(super) fn forward_parts(&mut self, parts: &[SequencePass<'_>]) -> Result<Vec<Tensor>> {
        self.forward_parts_into(parts, None)
    }

    /// `forward_parts`, narrowed as `pass` says.
    pub(super) fn forward_parts_into(
        &mut self,
        parts: &[SequencePass<'_>],
        narrow: Option<NarrowLogits<'_>>,
    ) -> Result<Vec<Tensor>> {
        let result = self.pass(parts, narrow);
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
    pub(super) fn forward_current(&mut self, tokens: &[u32], pos: usize, logits_from: Option<usize>) -> Result<Tensor> {
        let part = SequencePass { sequence: self.current, tokens, pos, logits_from };
        let mut logits = self.forward_parts(&[part])?;
        Ok(logits.remove(0))
    }
}

/// The token ids (ascending) whose logits a narrowed pass computes, and the `[n_logits]` buffer they go to.
pub(super) type NarrowLogits<'a> = (&'a [u32], &'a mut [f32]);

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
