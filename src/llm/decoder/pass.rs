//! One forward pass over the new tokens of one or more sequences: checks, RoPE rows and masks, the layers, and
//! attention over each sequence's own cache.

use std::collections::{HashMap, HashSet};

use candle_core::{DType, Module, Tensor};

use super::family::{DecoderConfig, LayerKind};
use super::gpu::PassTable;
use super::layers::{add_and_norm, parts_error, Layer};
use super::rope::{rotate, Rope};
use super::{Decoder, FFN_ROWS_AT_ONCE};
use crate::kernels::attention::{candle_attention, causal_attention};
use crate::llm::kv_cache::CacheSlots;
use crate::llm::{SequenceId, SequencePass};
use crate::Result;

impl Decoder {
    /// Grows the RoPE tables to cover `positions`.
    fn cover_rope_positions(&mut self, positions: usize) -> Result<()> {
        self.rope.cover(positions, &self.device)?;
        if let Some(local) = &mut self.local_rope {
            local.cover(positions, &self.device)?;
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
        let mask = windowed_mask(seq, pos, None, &self.device)?;
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
        let positions = match parts {
            [_] => None,
            _ => {
                let positions: Vec<u32> =
                    parts.iter().flat_map(|p| (p.pos..p.pos + p.tokens.len()).map(|i| i as u32)).collect();
                Some(Tensor::new(positions.as_slice(), &self.device)?)
            }
        };
        let rope_rows = |rope: &Rope| -> Result<RopeRows> {
            let (cos, sin) = rope.rows(parts[0].pos, rows, positions.as_ref())?;
            Ok(RopeRows { cos, sin })
        };
        let global = rope_rows(&self.rope)?;
        let local = self.local_rope.as_ref().map(rope_rows).transpose()?;
        let shape = PassShape { parts, rows, global, local, masks, table, on_cpu };
        let tokens: Vec<u32> = parts.iter().flat_map(|p| p.tokens.iter().copied()).collect();
        let ids = Tensor::new(tokens.as_slice(), &self.device)?.unsqueeze(0)?;
        let mut x = self.embedding.lookup(&ids)?; // [1, rows, hidden]
        if let Some(scale) = self.embedding_scale {
            x = (x * scale)?;
        }
        let (c, ours) = (&self.config, self.gpu_fused);
        let (activation, eps) = (c.family.activation, c.rms_eps);
        // Each block's output waits here to be added to the residual stream together with the next norm.
        let mut pending: Option<Tensor> = None;
        for (index, layer) in self.layers.iter().enumerate() {
            let h = add_and_norm(&mut x, pending.take(), &layer.attn_norm, eps, ours)?;
            let qkv: [Tensor; 3] = layer.qkv.forward(&h)?.try_into().map_err(|_| parts_error("qkv"))?;
            let attn = shape.attention(index, layer, qkv, c, &mut self.sequences)?;
            let mut attn = layer.wo.forward(&attn)?;
            if let Some(norm) = &layer.attn_post_norm {
                attn = candle_nn::ops::rms_norm(&attn, norm, eps)?;
            }
            let h = add_and_norm(&mut x, Some(attn), &layer.ffn_norm, eps, ours)?;
            let feed_forward = |h: &Tensor| layer.feed_forward(h, activation, eps, ours);
            pending = Some(match rows {
                // A long pass on the CPU runs the feed-forward block a slice of rows at a time: its intermediates
                // (four `[rows, ffn]` f32 tensors) set the prompt's peak memory, and each row is computed alone,
                // so the outputs do not change.
                rows if on_cpu && rows > FFN_ROWS_AT_ONCE => {
                    let slices = (0..rows)
                        .step_by(FFN_ROWS_AT_ONCE)
                        .map(|start| feed_forward(&h.narrow(1, start, FFN_ROWS_AT_ONCE.min(rows - start))?))
                        .collect::<Result<Vec<_>>>()?;
                    Tensor::cat(&slices, 1)?
                }
                _ => feed_forward(&h)?,
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

/// A RoPE's rows for each new token's position, `[rows, rotary / 2]`.
struct RopeRows {
    cos: Tensor,
    sin: Tensor,
}

/// Additive mask `[seq, pos + seq]`: new token i (at absolute position pos + i) sees positions ≤ pos + i, and with a
/// window only the last `window` of them (its own included).
fn windowed_mask(seq: usize, pos: usize, window: Option<usize>, device: &candle_core::Device) -> Result<Tensor> {
    let total = pos + seq;
    let sees = |i: usize, j: usize| j <= pos + i && window.is_none_or(|w| pos + i - j < w);
    let values: Vec<f32> =
        (0..seq).flat_map(|i| (0..total).map(move |j| if sees(i, j) { 0.0 } else { f32::NEG_INFINITY })).collect();
    Ok(Tensor::from_vec(values, (seq, total), device)?)
}

/// What every layer of one pass shares: its parts, their RoPE rows and masks, and where attention runs.
struct PassShape<'a, 'b> {
    parts: &'a [SequencePass<'b>],
    /// All parts' new tokens.
    rows: usize,
    /// RoPE rows of the global (or only) RoPE and of the sliding-window layers' one.
    global: RopeRows,
    local: Option<RopeRows>,
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
        index: usize,
        layer: &Layer,
        [q, k, v]: [Tensor; 3],
        c: &DecoderConfig,
        sequences: &mut HashMap<SequenceId, CacheSlots>,
    ) -> Result<Tensor> {
        let (rows, scale) = (self.rows, c.attention_scale);
        let kind = c.layer_kind(index);
        if let Some(table) = &self.table {
            // Only for plain layers (see `load`): halves layout over whole heads, no norms, no window. Rows stay
            // `[1, rows, heads, head_dim]`: the kernels read them so and write attention in the layout the output
            // projection takes.
            let RopeRows { cos, sin } = &self.global;
            let rows_of = |t: Tensor, n: usize| t.reshape((1, rows, n, c.head_dim))?.contiguous();
            let q = candle_nn::rotary_emb::rope_thd(&rows_of(q, c.n_head)?, cos, sin)?;
            let k = candle_nn::rotary_emb::rope_thd(&rows_of(k, c.n_kv_head)?, cos, sin)?;
            let attn = table.attend(index, &q, &k, &rows_of(v, c.n_kv_head)?, scale)?;
            for part in self.parts {
                let slots = sequences.get_mut(&part.sequence).expect("checked by check_parts");
                slots.active_mut().layers[index].advance(part.tokens.len());
            }
            return Ok(attn);
        }
        let heads = |t: Tensor, n: usize| -> candle_core::Result<Tensor> {
            t.reshape((1, rows, n, c.head_dim))?.transpose(1, 2)?.contiguous()
        };
        let (mut q, mut k) = (heads(q, c.n_head)?, heads(k, c.n_kv_head)?);
        if let Some(norm) = &layer.q_norm {
            q = candle_nn::ops::rms_norm(&q, norm, c.rms_eps)?;
        }
        if let Some(norm) = &layer.k_norm {
            k = candle_nn::ops::rms_norm(&k, norm, c.rms_eps)?;
        }
        if kind.rotates {
            let (rope, spec) = match (kind.window, &self.local, &c.local) {
                (Some(_), Some(local), Some((spec, _))) => (local, spec),
                _ => (&self.global, &c.rope),
            };
            q = rotate(&q, &rope.cos, &rope.sin, spec)?;
            k = rotate(&k, &rope.cos, &rope.sin, spec)?;
        }
        let v = heads(v, c.n_kv_head)?;
        let mut outputs = Vec::with_capacity(self.parts.len());
        let mut row = 0;
        for (part, mask) in self.parts.iter().zip(&self.masks) {
            let n = part.tokens.len();
            // A part's rows of `[1, heads, rows, head_dim]`.
            let own_rows =
                |t: &Tensor| if self.parts.len() == 1 { Ok(t.clone()) } else { t.narrow(2, row, n)?.contiguous() };
            let slots = sequences.get_mut(&part.sequence).expect("checked by check_parts");
            let cache = &mut slots.active_mut().layers[index];
            cache.truncate(part.pos);
            let (keys, values) = cache.append(&own_rows(&k)?, &own_rows(&v)?, c.context_length)?;
            let q = own_rows(&q)?;
            outputs.push(attend_part(&q, keys, values, part.pos, kind, mask.as_ref(), scale, self.on_cpu)?);
            row += n;
        }
        Ok(if outputs.len() == 1 { outputs.remove(0) } else { Tensor::cat(&outputs, 1)? })
    }
}

/// One part's attention over its cache's `keys` and `values` (`[1, kv_heads, pos + rows, head_dim]`): our CPU
/// kernel where it applies, else candle's ops with the part's mask. A sliding-window layer whose window the part
/// outgrows reads only the window: one row, by cutting the cache view to it; several, through a windowed mask.
#[allow(clippy::too_many_arguments)]
fn attend_part(
    q: &Tensor,
    keys: Tensor,
    values: Tensor,
    pos: usize,
    kind: LayerKind,
    mask: Option<&Tensor>,
    scale: f32,
    on_cpu: bool,
) -> Result<Tensor> {
    let n = q.dim(2)?;
    let (keys, values, pos, mask) = match kind.window {
        Some(window) if pos + n > window => {
            if n == 1 {
                let (start, len) = (pos + 1 - window, window);
                (keys.narrow(2, start, len)?, values.narrow(2, start, len)?, window - 1, None)
            } else {
                let mask = windowed_mask(n, pos, Some(window), q.device())?;
                return Ok(candle_attention(q, &keys, &values, Some(&mask), scale as f64)?);
            }
        }
        _ => (keys, values, pos, mask.cloned()),
    };
    if on_cpu {
        causal_attention(q, &keys, &values, pos, scale)
    } else {
        Ok(candle_attention(q, &keys, &values, mask.as_ref(), scale as f64)?)
    }
}
