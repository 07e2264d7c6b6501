//! RoPE tables, built for the positions used so far.

use candle_core::{DType, Device, Tensor};

use crate::Result;

/// Positions the RoPE tables are built for at a time: a model's full context (32768 for Qwen2.5) would take 8 to
/// 17 MiB that most runs never touch.
pub(super) const ROPE_GROWTH: usize = 4096;

/// RoPE cos/sin tables for the NeoX layout (halves rotated), `[context, head_dim / 2]`.
pub(super) fn rope_tables(head_dim: usize, base: f32, context: usize, device: &Device) -> Result<(Tensor, Tensor)> {
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
