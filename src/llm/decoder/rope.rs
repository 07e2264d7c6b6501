//! Rotary position embeddings: the tables, built for the positions used so far, and their application in either
//! pairing, over all of a head or its first values only.

use candle_core::{DType, Device, Tensor, D};

use crate::Result;

/// Positions the RoPE tables are built for at a time: a model's full context (32768 for Qwen2.5) would take 8 to
/// 17 MiB that most runs never touch.
pub(super) const ROPE_GROWTH: usize = 4096;

/// Which values of a head rotate together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeLayout {
    /// Value `i` with value `i + rotary / 2` (GPT-NeoX's layout: Qwen, Phi-3, Gemma).
    Halves,
    /// Value `2i` with value `2i + 1` (Llama's files, whose q/k rows llama.cpp's converter interleaves).
    Adjacent,
}

/// One RoPE: how a model's positions become rotations.
#[derive(Debug, Clone)]
pub struct RopeSpec {
    pub base: f32,
    /// Values of a head that rotate (the first ones; the rest pass through: Phi-4-mini's partial rotary).
    pub rotary: usize,
    pub layout: RopeLayout,
    /// Multiplies positions (`1 / factor` of linear or YaRN scaling; 1 otherwise).
    pub position_scale: f32,
    /// YaRN: which frequencies take `position_scale` and which keep their speed (`None`: all take it).
    pub yarn: Option<YarnRamp>,
    /// A tensor of per-frequency divisors (Llama 3's `rope_freqs.weight`, Phi-3's LongRoPE factors), by name.
    pub factors: Option<&'static str>,
    /// Multiplies the rotation's cos and sin (LongRoPE's attention factor, YaRN's magnitude; 1 otherwise).
    pub attention_factor: f32,
}

/// YaRN's blend of slowed and original frequencies (llama.cpp's `rope_yarn`, after the YaRN paper): the fast
/// frequencies, which turn many times within the length the model was trained at, keep their speed; the slow ones,
/// which never turned once there, are slowed by the scaling factor as linear scaling would; between, a linear ramp.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YarnRamp {
    /// Frequencies up to this index keep their speed.
    pub low: f32,
    /// Frequencies from this index on are slowed whole.
    pub high: f32,
}

impl YarnRamp {
    /// The ramp of a model trained on `original` positions, `rotary` values of a head rotating at `base`, with
    /// YaRN's default bounds: a frequency that turns 32 times or more within `original` keeps its speed, one that
    /// turns once or less is slowed. llama.cpp reads no other bounds for the families we run.
    pub fn new(rotary: usize, original: usize, base: f32) -> Self {
        let index_turning = |turns: f32| {
            rotary as f32 * (original as f32 / (turns * 2.0 * std::f32::consts::PI)).ln() / (2.0 * base.ln())
        };
        Self { low: index_turning(32.0).floor().max(0.0), high: index_turning(1.0).ceil().min(rotary as f32 - 1.0) }
    }

    /// How much of frequency `i` keeps its speed: 1 below `low`, 0 from `high` on.
    fn kept(&self, i: usize) -> f32 {
        let along = (i as f32 - self.low) / (self.high - self.low).max(0.001);
        1.0 - along.clamp(0.0, 1.0)
    }
}

/// A RoPE with its tables `[positions, rotary / 2]` for the positions covered so far.
pub(super) struct Rope {
    pub(super) spec: RopeSpec,
    /// The frequency divisors' values, as read from the file.
    factors: Option<Vec<f32>>,
    pub(super) cos: Tensor,
    pub(super) sin: Tensor,
}

impl Rope {
    /// Tables for the first `positions` positions.
    pub(super) fn new(spec: RopeSpec, factors: Option<Vec<f32>>, positions: usize, device: &Device) -> Result<Self> {
        let (cos, sin) = rope_tables(&spec, factors.as_deref(), positions, device)?;
        Ok(Self { spec, factors, cos, sin })
    }

    /// Grows the tables to cover `positions` rows (each row is computed alone, so a grown table holds the same
    /// values as one built whole).
    pub(super) fn cover(&mut self, positions: usize, device: &Device) -> Result<()> {
        if positions > self.cos.dim(0)? {
            let rows = positions.div_ceil(ROPE_GROWTH).saturating_mul(ROPE_GROWTH);
            (self.cos, self.sin) = rope_tables(&self.spec, self.factors.as_deref(), rows, device)?;
        }
        Ok(())
    }

    /// The table rows of the given positions: `(cos, sin)`, each `[rows, rotary / 2]`.
    pub(super) fn rows(&self, first: usize, count: usize, positions: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        Ok(match positions {
            None => (self.cos.narrow(0, first, count)?, self.sin.narrow(0, first, count)?),
            Some(ids) => (self.cos.index_select(ids, 0)?, self.sin.index_select(ids, 0)?),
        })
    }
}

/// Rotates `x` `[1, heads, rows, head_dim]` (contiguous) by the rows' `cos`/`sin` `[rows, rotary / 2]`.
pub(super) fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor, spec: &RopeSpec) -> Result<Tensor> {
    let head_dim = x.dim(D::Minus1)?;
    let apply = |t: &Tensor| -> candle_core::Result<Tensor> {
        match spec.layout {
            RopeLayout::Halves => candle_nn::rotary_emb::rope(t, cos, sin),
            RopeLayout::Adjacent => candle_nn::rotary_emb::rope_i(t, cos, sin),
        }
    };
    if spec.rotary == head_dim {
        return Ok(apply(x)?);
    }
    let turned = apply(&x.narrow(D::Minus1, 0, spec.rotary)?.contiguous()?)?;
    let kept = x.narrow(D::Minus1, spec.rotary, head_dim - spec.rotary)?;
    Ok(Tensor::cat(&[turned, kept], D::Minus1)?.contiguous()?)
}

/// RoPE cos/sin tables `[positions, rotary / 2]`: frequency `i` is `base^(-2i / rotary)`, divided by its factor
/// where the model has factors, times `position_scale` (under YaRN, only as far as the ramp slows it); angles are
/// `position · frequency`.
fn rope_tables(
    spec: &RopeSpec,
    factors: Option<&[f32]>,
    positions: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let half = spec.rotary / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| {
            let freq = 1.0 / spec.base.powf(2.0 * i as f32 / spec.rotary as f32);
            let freq = freq / factors.and_then(|f| f.get(i)).copied().unwrap_or(1.0);
            let speed = match spec.yarn {
                Some(ramp) => spec.position_scale * (1.0 - ramp.kept(i)) + ramp.kept(i),
                None => spec.position_scale,
            };
            freq * speed
        })
        .collect();
    let inv_freq = Tensor::from_vec(inv_freq, (1, half), device)?;
    let positions = Tensor::arange(0u32, positions as u32, device)?.to_dtype(DType::F32)?.reshape((positions, 1))?;
    let angles = positions.broadcast_mul(&inv_freq)?;
    let factor = spec.attention_factor as f64;
    Ok(((angles.cos()? * factor)?, (angles.sin()? * factor)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rotary: usize) -> RopeSpec {
        RopeSpec {
            base: 1_000_000.0,
            rotary,
            layout: RopeLayout::Halves,
            position_scale: 1.0,
            yarn: None,
            factors: None,
            attention_factor: 1.0,
        }
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().map(|x| x.to_bits()).collect()
    }

    /// Growing the tables must not move a position's values: a table for fewer positions is the start of a
    /// longer one, bit for bit.
    #[test]
    fn a_grown_rope_table_starts_with_the_shorter_one() {
        let mut rope = Rope::new(spec(64), None, 37, &Device::Cpu).unwrap();
        let (short_cos, short_sin) = (rope.cos.clone(), rope.sin.clone());
        rope.cover(ROPE_GROWTH + 5, &Device::Cpu).unwrap();
        assert_eq!(bits(&short_cos), bits(&rope.cos.narrow(0, 0, 37).unwrap()));
        assert_eq!(bits(&short_sin), bits(&rope.sin.narrow(0, 0, 37).unwrap()));
        assert_eq!(rope.cos.dims(), &[2 * ROPE_GROWTH, 32]);
    }

    /// A factor divides its frequency: factor 2 on frequency `i` gives at position `2p` the angle that factor 1
    /// gives at `p`.
    #[test]
    fn frequency_factors_divide_their_frequency() {
        let plain = Rope::new(spec(8), None, 16, &Device::Cpu).unwrap();
        let halved = Rope::new(spec(8), Some(vec![2.0, 1.0, 1.0, 1.0]), 16, &Device::Cpu).unwrap();
        let at = |r: &Rope, p: usize, i: usize| r.cos.get(p).unwrap().get(i).unwrap().to_scalar::<f32>().unwrap();
        assert!((at(&halved, 10, 0) - at(&plain, 5, 0)).abs() < 1e-6);
        assert_eq!(at(&halved, 10, 1), at(&plain, 10, 1));
    }

    /// Partial rotary leaves the values past `rotary` as they were and rotates the first ones as a full RoPE over
    /// a head of that width does.
    #[test]
    fn partial_rotary_passes_the_rest_through() {
        let x = Tensor::arange(0f32, 2.0 * 3.0 * 8.0, &Device::Cpu).unwrap().reshape((1, 2, 3, 8)).unwrap();
        let x = (x / 7.0).unwrap().sin().unwrap();
        let rope = Rope::new(spec(4), None, 3, &Device::Cpu).unwrap();
        let (cos, sin) = rope.rows(0, 3, None).unwrap();
        let out = rotate(&x, &cos, &sin, &rope.spec).unwrap();
        assert_eq!(bits(&out.narrow(3, 4, 4).unwrap()), bits(&x.narrow(3, 4, 4).unwrap()));
        let first = candle_nn::rotary_emb::rope(&x.narrow(3, 0, 4).unwrap().contiguous().unwrap(), &cos, &sin).unwrap();
        assert_eq!(bits(&out.narrow(3, 0, 4).unwrap()), bits(&first));
    }

    /// YaRN keeps the fast frequencies' speed, slows the slow ones by the scale, and blends between: the ramp of
    /// 64 rotating values at base 10^6 trained on 32 positions runs over frequencies 0 to 4 (llama.cpp's
    /// `ggml_rope_yarn_corr_dims` gives the same).
    #[test]
    fn yarn_slows_only_the_slow_frequencies() {
        let ramp = YarnRamp::new(64, 32, 1_000_000.0);
        assert_eq!((ramp.low, ramp.high), (0.0, 4.0));
        let plain = Rope::new(spec(64), None, 8, &Device::Cpu).unwrap();
        let yarn = RopeSpec { position_scale: 0.25, yarn: Some(ramp), ..spec(64) };
        let yarn = Rope::new(yarn, None, 8, &Device::Cpu).unwrap();
        let angle = |r: &Rope, p: usize, i: usize| {
            let sin = r.sin.get(p).unwrap().get(i).unwrap().to_scalar::<f32>().unwrap();
            let cos = r.cos.get(p).unwrap().get(i).unwrap().to_scalar::<f32>().unwrap();
            sin.atan2(cos)
        };
        assert!((angle(&yarn, 1, 0) - angle(&plain, 1, 0)).abs() < 1e-6, "the fastest keeps its speed");
        assert!((angle(&yarn, 4, 20) - angle(&plain, 1, 20)).abs() < 1e-6, "a slow one is slowed 4 times");
        let (kept, slowed) = (angle(&plain, 1, 2), angle(&plain, 1, 2) * 0.25);
        let between = angle(&yarn, 1, 2);
        assert!(slowed < between && between < kept, "frequency 2 is between: {slowed} < {between} < {kept}");
    }
}
