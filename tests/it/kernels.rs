//! Our quantized matmul kernels against the scalar reference and against candle's own Q8_0 path.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rstest::rstest;
use tandem::kernels::kquants::{self, Q4KMatrix, Q5KMatrix, Q6KMatrix};
use tandem::kernels::q5_0::{self, Q5_0Matrix};
use tandem::kernels::q8_0::{reference_matmul, Q8_0Matrix};
use tandem::kernels::{cpu_level, CpuLevel, Q4KPanels, Q5KPanels, Q5_0Panels, Q6KPanels, QLinear};

fn random_values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// Largest |a - b| relative to the largest |b|.
fn relative_error(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-6);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// Tile edges: fewer rows than a tile, a tile and one, odd activation counts, the 0.5B's widths.
#[rstest]
#[case(1, 32, 1)]
#[case(3, 64, 1)]
#[case(4, 96, 2)]
#[case(5, 128, 3)]
#[case(17, 896, 1)]
#[case(33, 896, 7)]
#[case(40, 4864, 2)]
#[case(130, 256, 9)]
#[case(9, 96, 5)]
#[case(8, 1536, 4)]
#[case(48, 4864, 8)]
#[case(32, 96, 12)]
fn fast_kernel_matches_the_reference(#[case] rows: usize, #[case] cols: usize, #[case] m: usize) {
    let weight = Q8_0Matrix::quantize(rows, cols, &random_values(rows * cols, 1));
    let input = random_values(m * cols, 2);
    let reference = reference_matmul(&weight, &input, m);
    for level in cpu_level().with_lower_levels() {
        let mut fast = vec![f32::NAN; m * rows];
        weight.matmul_at(level, &input, m, &mut fast);
        // Integer dot products are exact; only the order of the f32 sums differs.
        let err = relative_error(&fast, &reference);
        assert!(err < 1e-5, "{level:?} {rows}x{cols}, m={m}: relative error {err}");
        assert!(fast.iter().all(|x| x.is_finite()), "{level:?}: every output written");
    }
}

#[test]
fn matches_candles_q8_0_matmul_on_the_same_weights() {
    let (rows, cols, m) = (48, 896, 5);
    let device = Device::Cpu;
    let dense = Tensor::from_vec(random_values(rows * cols, 3), (rows, cols), &device).unwrap();
    let qtensor = QTensor::quantize(&dense, GgmlDType::Q8_0).unwrap();
    let ours = QLinear::Ours(std::sync::Arc::new(Q8_0Matrix::from_qtensor(&qtensor).unwrap()));
    let theirs = QMatMul::from_qtensor(qtensor).unwrap();
    let x = Tensor::from_vec(random_values(m * cols, 4), (1, m, cols), &device).unwrap();
    let a = ours.forward(&x).unwrap();
    let b = theirs.forward(&x).unwrap();
    assert_eq!(a.dims(), &[1, m, rows]);
    let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    // Same int8 weights and activation rounding; candle sums in a different order.
    let err = relative_error(&a, &b);
    assert!(err < 1e-3, "relative error {err}");
}

#[test]
fn loads_gguf_blocks_exactly_and_looks_up_rows() {
    let (rows, cols) = (6, 64);
    let device = Device::Cpu;
    let dense = Tensor::from_vec(random_values(rows * cols, 5), (rows, cols), &device).unwrap();
    let qtensor = QTensor::quantize(&dense, GgmlDType::Q8_0).unwrap();
    let expected = qtensor.dequantize(&device).unwrap().to_vec2::<f32>().unwrap();
    let ours = Q8_0Matrix::from_qtensor(&qtensor).unwrap();
    for (r, row) in expected.iter().enumerate() {
        assert_eq!(&ours.dequantize_row(r), row, "row {r}");
    }
    let linear = QLinear::Ours(std::sync::Arc::new(ours));
    let ids = Tensor::new(&[[4u32, 0, 4]], &device).unwrap();
    let embedded = linear.embedding(&ids).unwrap();
    assert_eq!(embedded.dims(), &[1, 3, cols]);
    let embedded = embedded.get(0).unwrap().to_vec2::<f32>().unwrap();
    assert_eq!(embedded, [expected[4].clone(), expected[0].clone(), expected[4].clone()]);
}

#[test]
fn rejects_bad_shapes_and_ids_with_a_message() {
    let err = Q8_0Matrix::from_gguf_bytes(2, 48, &[0; 2 * 48 / 32 * 34]).unwrap_err().to_string();
    assert!(err.contains("not a multiple of 32"), "{err}");
    let err = Q8_0Matrix::from_gguf_bytes(2, 64, &[0; 100]).unwrap_err().to_string();
    assert!(err.contains("100 bytes") && err.contains("expected 136"), "{err}");
    let matrix = QLinear::Ours(std::sync::Arc::new(Q8_0Matrix::quantize(2, 32, &random_values(64, 6))));
    let err = matrix.embedding(&Tensor::new(&[2u32], &Device::Cpu).unwrap()).unwrap_err().to_string();
    assert!(err.contains("token id 2"), "{err}");
}

#[test]
fn q8_0_weights_take_our_kernel_where_the_cpu_has_one() {
    let dense = Tensor::from_vec(random_values(16 * 64, 7), (16, 64), &Device::Cpu).unwrap();
    let q8 = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q8_0).unwrap()).unwrap();
    let q4 = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q4_0).unwrap()).unwrap();
    let q4_1 = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q4_1).unwrap()).unwrap();
    let q5_1 = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q5_1).unwrap()).unwrap();
    let dense = Tensor::from_vec(random_values(16 * 256, 7), (16, 256), &Device::Cpu).unwrap();
    let q4k = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q4K).unwrap()).unwrap();
    let q6k = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q6K).unwrap()).unwrap();
    let q5k = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q5K).unwrap()).unwrap();
    let ours = cpu_level() >= CpuLevel::Avx2;
    assert_eq!(q8.kernel_name(), if ours { "tandem-q8_0" } else { "candle" });
    let (q4k_kernel, q6k_kernel) = match cpu_level() {
        CpuLevel::Avx512Vnni => ("tandem-q4_k-panels", "tandem-q6_k-panels"),
        CpuLevel::Avx2 | CpuLevel::AvxVnni => ("tandem-q4_k-panels", "tandem-q6_k"),
        CpuLevel::Portable => ("candle", "candle"),
    };
    assert_eq!(q4k.kernel_name(), q4k_kernel);
    assert_eq!(q6k.kernel_name(), q6k_kernel);
    // Q5_K's panels run their AVX2 kernel at every level from AVX2 up.
    assert_eq!(q5k.kernel_name(), if ours { "tandem-q5_k-panels" } else { "candle" });
    assert_eq!(q4.kernel_name(), if ours { "tandem-q4_0" } else { "candle" });
    assert_eq!(q4_1.kernel_name(), if ours { "tandem-q4_1" } else { "candle" });
    assert_eq!(q5_1.kernel_name(), "candle", "types without a kernel of ours stay on candle's");
}

/// F16 and BF16 weights stay at two bytes a value on our kernel (candle's widens them to f32), and its product is
/// candle's product of the same weights widened.
#[test]
fn half_precision_weights_keep_their_two_bytes_on_our_kernel() {
    let dense = Tensor::from_vec(random_values(24 * 80, 9), (24, 80), &Device::Cpu).unwrap();
    let input = Tensor::from_vec(random_values(3 * 80, 4), (1, 3, 80), &Device::Cpu).unwrap();
    let ours = cpu_level() >= CpuLevel::Avx2;
    for (dtype, name) in [(GgmlDType::F16, "tandem-f16"), (GgmlDType::BF16, "tandem-bf16")] {
        let weight = QTensor::quantize(&dense, dtype).unwrap();
        let widened = weight.dequantize(&Device::Cpu).unwrap();
        let linear = QLinear::new(weight).unwrap();
        assert_eq!(linear.kernel_name(), if ours { name } else { "candle" }, "{dtype:?}");
        let got = linear.forward(&input).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let want =
            input.broadcast_matmul(&widened.t().unwrap()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-4, "{dtype:?}: {worst}");
    }
}

#[test]
fn q5_0_widens_to_int8_exactly() {
    let (rows, cols) = (5, 96);
    let device = Device::Cpu;
    let dense = Tensor::from_vec(random_values(rows * cols, 8), (rows, cols), &device).unwrap();
    let q5 = QTensor::quantize(&dense, GgmlDType::Q5_0).unwrap();
    let expected: Vec<f32> = q5.dequantize(&device).unwrap().flatten_all().unwrap().to_vec1().unwrap();
    let ours = Q8_0Matrix::from_q5_0(&q5).unwrap();
    for r in 0..rows {
        assert_eq!(ours.dequantize_row(r), expected[r * cols..(r + 1) * cols], "row {r}: candle's Q5_0 values");
    }
    let err = Q8_0Matrix::from_q5_0_bytes(1, 32, &[0; 21]).unwrap_err().to_string();
    assert!(err.contains("Q5_0 data of 21 bytes") && err.contains("expected 22"), "{err}");
}

#[test]
fn q5_0_keeps_five_bits_and_unpacks_to_candles_values() {
    // 20 blocks a row: two and a half bit planes (8 blocks each). 11 blocks (352) are no whole block pairs.
    let (rows, cols) = (5, 640);
    let (q5, expected) = candle_weights(rows, cols, GgmlDType::Q5_0, 9);
    let ours = Q5_0Matrix::from_qtensor(&q5).unwrap();
    for r in 0..rows {
        assert_eq!(ours.dequantize_row(r), expected[r * cols..(r + 1) * cols], "row {r}: candle's Q5_0 values");
    }
    let (odd_pairs, _) = candle_weights(2, 352, GgmlDType::Q5_0, 9);
    let err = Q5_0Matrix::from_qtensor(&odd_pairs).unwrap_err().to_string();
    assert!(err.contains("Q5_0 width 352 is not a multiple of 64"), "{err}");
    let err = Q5_0Matrix::from_gguf_bytes(1, 64, &[0; 43]).unwrap_err().to_string();
    assert!(err.contains("Q5_0 data of 43 bytes") && err.contains("expected 44"), "{err}");
}

/// The five-bit panels give the widened int8 matrix's values and its products: through the AVX-512 kernels bit for
/// bit (so the model's outputs do not change), through the AVX2 kernel those same bits (its integers and f32 steps
/// are the VNNI kernel's), within 1e-5 of the scalar reference on any CPU with a kernel: partial last panels (1,
/// 17, 29, 40 rows), odd block counts (3, 27 blocks) and the 0.5B's widths; activation tiles of 1 to 4 rows and
/// remainders.
#[rstest]
#[case(1, 32, 1)]
#[case(17, 96, 2)]
#[case(16, 864, 3)]
#[case(40, 896, 1)]
#[case(33, 896, 7)]
#[case(48, 4864, 9)]
#[case(29, 896, 1)]
#[case(29, 896, 2)]
fn q5_0_panels_equal_the_widened_matrix_bit_for_bit(#[case] rows: usize, #[case] cols: usize, #[case] m: usize) {
    let (q5, expected) = candle_weights(rows, cols, GgmlDType::Q5_0, 15);
    let widened = Q8_0Matrix::from_q5_0(&q5).unwrap();
    let panels = Q5_0Panels::from_qtensor(&q5).unwrap();
    for r in 0..rows {
        assert_eq!(panels.dequantize_row(r), expected[r * cols..(r + 1) * cols], "row {r}: candle's Q5_0 values");
    }
    let input = random_values(m * cols, 16);
    let reference = reference_matmul(&widened, &input, m);
    let mut by_level: Vec<Vec<f32>> = Vec::new();
    for level in cpu_level().with_lower_levels().into_iter().filter(|&level| level >= Q5_0Panels::MIN_LEVEL) {
        let mut by_panels = vec![f32::NAN; m * rows];
        panels.matmul_at(level, &input, m, &mut by_panels);
        let err = relative_error(&by_panels, &reference);
        assert!(err < 1e-5, "{level:?} {rows}x{cols}, m={m}: relative error {err} against the widened reference");
        if level == CpuLevel::Avx512Vnni {
            let mut by_int8 = vec![f32::NAN; m * rows];
            widened.matmul_at(level, &input, m, &mut by_int8);
            for (i, (a, b)) in by_panels.iter().zip(&by_int8).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{rows}x{cols}, m={m}: output {i} is {a}, widened {b}");
            }
        }
        // The AVX2 kernel's integers and f32 steps are the VNNI kernel's: the same bits.
        if let Some(lower) = by_level.last() {
            let same = lower.iter().zip(&by_panels).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{rows}x{cols}, m={m}: the {level:?} Q5_0 panel kernel differs from the one below it");
        }
        by_level.push(by_panels);
    }
    assert_eq!(by_level.is_empty(), !Q5_0Panels::supported(), "a kernel ran wherever the panels are supported");
}

/// Decode tiles (m < 4: the five-bit kernel) and prefill tiles (m ≥ 4: rows unpacked to int8 for the Q8_0
/// kernel), with tile edges in rows, a partial last bit plane (896 = 3.5 planes) and the 0.5B's shapes.
#[rstest]
#[case(1, 64, 1)]
#[case(3, 128, 2)]
#[case(5, 896, 1)]
#[case(9, 896, 3)]
#[case(17, 896, 4)]
#[case(33, 896, 9)]
#[case(40, 4864, 1)]
#[case(21, 4864, 5)]
fn q5_0_kernels_match_the_reference(#[case] rows: usize, #[case] cols: usize, #[case] m: usize) {
    let (q5, _) = candle_weights(rows, cols, GgmlDType::Q5_0, 10);
    let weight = Q5_0Matrix::from_qtensor(&q5).unwrap();
    let input = random_values(m * cols, 11);
    let mut fast = vec![f32::NAN; m * rows];
    weight.matmul(&input, m, &mut fast);
    let reference = q5_0::reference_matmul(&weight, &input, m);
    // The decode kernel sums unsigned values and subtracts 16 · Σ q at the end: two f32 sums larger than the
    // result, so a few bits more rounding than the int8 kernels' 1e-5 (a wrong value or layout is off by far more).
    let err = relative_error(&fast, &reference);
    assert!(err < 1e-4, "{rows}x{cols}, m={m}: relative error {err}");
    // The same integers widened to int8 give the same product through the Q8_0 kernel.
    let widened = Q8_0Matrix::from_q5_0(&q5).unwrap();
    let mut by_int8 = vec![f32::NAN; m * rows];
    widened.matmul(&input, m, &mut by_int8);
    let err = relative_error(&fast, &by_int8);
    assert!(err < 1e-4, "{rows}x{cols}, m={m}: relative error {err} against the widened weights");
}

/// Random weights quantized by candle to `dtype`, with candle's dequantized values `[rows][cols]`.
fn candle_weights(rows: usize, cols: usize, dtype: GgmlDType, seed: u64) -> (QTensor, Vec<f32>) {
    // Spread magnitudes per row, so the super-block scales and minimums differ.
    let mut values = random_values(rows * cols, seed);
    for (r, row) in values.chunks_exact_mut(cols).enumerate() {
        row.iter_mut().for_each(|v| *v = *v * (1.0 + r as f32 * 0.37) + 0.1 * (r % 3) as f32);
    }
    let dense = Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap();
    let q = QTensor::quantize(&dense, dtype).unwrap();
    let dequantized = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
    (q, dequantized)
}

#[rstest]
#[case(GgmlDType::Q4K)]
#[case(GgmlDType::Q5K)]
#[case(GgmlDType::Q6K)]
fn k_quants_unpack_to_candles_values(#[case] dtype: GgmlDType) {
    let (rows, cols) = (7, 512);
    let (q, expected) = candle_weights(rows, cols, dtype, 9);
    let rows_of = |r: usize| -> Vec<f32> {
        match dtype {
            GgmlDType::Q4K => Q4KMatrix::from_qtensor(&q).unwrap().dequantize_row(r),
            GgmlDType::Q5K => Q5KMatrix::from_qtensor(&q).unwrap().dequantize_row(r),
            _ => Q6KMatrix::from_qtensor(&q).unwrap().dequantize_row(r),
        }
    };
    for r in 0..rows {
        assert_eq!(rows_of(r), expected[r * cols..(r + 1) * cols], "row {r}");
    }
    // The panel layouts give back every row of their panels, the last one partly filled.
    let panel_rows = |r: usize| -> Vec<f32> {
        match dtype {
            GgmlDType::Q4K => Q4KPanels::from_qtensor(&q).unwrap().dequantize_row(r),
            GgmlDType::Q5K => Q5KPanels::from_qtensor(&q).unwrap().dequantize_row(r),
            _ => Q6KPanels::from_qtensor(&q).unwrap().dequantize_row(r),
        }
    };
    for r in 0..rows {
        assert_eq!(panel_rows(r), expected[r * cols..(r + 1) * cols], "panel row {r}");
    }
}

/// Tile edges for the K-quant kernels: activation counts 1–4 and beyond, one to many super-blocks, the models'
/// widths (0.5B down: 4864, 1.5B: 1536 and 8960); from 16 activation rows the AVX2 Q6_K kernel unpacks its weight
/// rows to bytes first; one and two activation rows over whole panels and a panel with a partial second half (the
/// AVX2 panel kernels' both-halves tiles).
#[rstest]
#[case(1, 256, 1)]
#[case(3, 512, 2)]
#[case(5, 768, 3)]
#[case(17, 1536, 4)]
#[case(9, 4864, 5)]
#[case(33, 256, 11)]
#[case(4, 8960, 1)]
#[case(32, 512, 9)]
#[case(40, 1536, 13)]
#[case(16, 8960, 8)]
#[case(17, 1536, 16)]
#[case(24, 8960, 19)]
#[case(29, 512, 1)]
#[case(29, 512, 2)]
#[case(32, 1536, 1)]
fn k_quant_kernels_match_the_reference(#[case] rows: usize, #[case] cols: usize, #[case] m: usize) {
    let input = random_values(m * cols, 10);
    let (q4, _) = candle_weights(rows, cols, GgmlDType::Q4K, 11);
    let q4 = Q4KMatrix::from_qtensor(&q4).unwrap();
    let (q6, _) = candle_weights(rows, cols, GgmlDType::Q6K, 12);
    let q6 = Q6KMatrix::from_qtensor(&q6).unwrap();
    let (q5, _) = candle_weights(rows, cols, GgmlDType::Q5K, 17);
    let q5 = Q5KMatrix::from_qtensor(&q5).unwrap();
    assert_k_quant_kernels_match(&q4, &q5, &q6, &input, m);
}

/// Every K-quant kernel this CPU can run gives the reference's product of `input` (`m` rows) with `q4`, `q5` and
/// `q6`.
fn assert_k_quant_kernels_match(q4: &Q4KMatrix, q5: &Q5KMatrix, q6: &Q6KMatrix, input: &[f32], m: usize) {
    let q4_reference = kquants::reference_matmul(q4, input, m, Q4KMatrix::dequantize_row);
    let q5_reference = kquants::reference_matmul(q5, input, m, Q5KMatrix::dequantize_row);
    let q6_reference = kquants::reference_matmul(q6, input, m, Q6KMatrix::dequantize_row);
    for level in cpu_level().with_lower_levels() {
        let mut fast = vec![f32::NAN; m * q4.rows()];
        q4.matmul_at(level, input, m, &mut fast);
        let err = relative_error(&fast, &q4_reference);
        assert!(err < 1e-4, "{level:?} Q4_K {}x{}, m={m}: relative error {err}", q4.rows(), q4.cols());
        let mut fast = vec![f32::NAN; m * q6.rows()];
        q6.matmul_at(level, input, m, &mut fast);
        let err = relative_error(&fast, &q6_reference);
        assert!(err < 1e-4, "{level:?} Q6_K {}x{}, m={m}: relative error {err}", q6.rows(), q6.cols());
    }
    // The Q4_K panels have an AVX2 kernel, an AVX-VNNI one and an AVX-512 VNNI one, the Q6_K panels a VNNI one (on
    // AVX2 the row kernel decoded 1.8x as fast as a panel kernel and prefilled as fast), the Q5_K panels an AVX2
    // one that every level runs: each runs where the CPU allows, and the kernels of every level agree bit for bit.
    let q4_panels = Q4KPanels::from_rows(q4);
    let q5_panels = Q5KPanels::from_rows(q5);
    let q6_panels = Q6KPanels::from_rows(q6);
    let panel_products: [PanelProduct; 3] = [
        (
            "Q4_K",
            q4.rows(),
            &q4_reference,
            Q4KPanels::MIN_LEVEL,
            Box::new(|level, out| q4_panels.matmul_at(level, input, m, out)),
        ),
        (
            "Q5_K",
            q5.rows(),
            &q5_reference,
            Q5KPanels::MIN_LEVEL,
            Box::new(|level, out| q5_panels.matmul_at(level, input, m, out)),
        ),
        (
            "Q6_K",
            q6.rows(),
            &q6_reference,
            Q6KPanels::MIN_LEVEL,
            Box::new(|level, out| q6_panels.matmul_at(level, input, m, out)),
        ),
    ];
    let mut ran = Vec::new();
    for (name, rows, reference, min_level, product) in panel_products {
        let mut by_level = Vec::new();
        for level in cpu_level().with_lower_levels().into_iter().filter(|&level| level >= min_level) {
            let mut fast = vec![f32::NAN; m * rows];
            product(level, &mut fast);
            let err = relative_error(&fast, reference);
            assert!(err < 1e-4, "{level:?} {name} panels {rows}x{}, m={m}: relative error {err}", q4.cols());
            by_level.push((level, fast));
            ran.push(name);
        }
        if let [(low, first), higher @ ..] = &by_level[..] {
            for (high, second) in higher {
                let same = first.iter().zip(second).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{name} panels {rows}x{}, m={m}: {low:?} and {high:?} kernels differ", q4.cols());
            }
        }
    }
    assert_eq!(ran.contains(&"Q5_K"), Q5KPanels::supported(), "the Q5_K kernel ran wherever the panels are supported");
}

/// A named panel product at a kernel level: `(name, rows, reference, lowest level, |level, out|)`.
type PanelProduct<'a> = (&'static str, usize, &'a [f32], CpuLevel, Box<dyn Fn(CpuLevel, &mut [f32]) + 'a>);

/// A batched product equals one-row products bit for bit at every kernel level: a drafted token's logits, checked
/// in a batch, must be the ones a one-token pass gives, or speculative decoding could change the output. The
/// 40-row matrices take, on AVX-512 VNNI CPUs, the Q8_0 panel kernel for two tiles of rows and the row kernel for
/// the rest, and the stored panels (Q4_K, Q6_K, Q5_0) for all 40, the last panel half full; the Q8_0 and Q5_0
/// ones of width 1568 end in an odd block. Batches of 3, 11 and 100 rows: the Q8_0 panels run from 4 activation
/// rows on (the row kernel below), the Q6_K panels unpack to bytes first from 96 rows on, the AVX2 Q6_K row kernel
/// from 16.
#[rstest]
#[case(3)]
#[case(11)]
#[case(100)]
fn batches_equal_single_rows_bit_for_bit(#[case] m: usize) {
    let rows = 40;
    let q4 = Q4KMatrix::from_qtensor(&candle_weights(rows, 1536, GgmlDType::Q4K, 22).0).unwrap();
    let q6 = Q6KMatrix::from_qtensor(&candle_weights(rows, 1536, GgmlDType::Q6K, 23).0).unwrap();
    let q8 = Q8_0Matrix::quantize(rows, 1568, &random_values(rows * 1568, 24));
    let q4_panels = Q4KPanels::from_rows(&q4);
    let q6_panels = Q6KPanels::from_rows(&q6);
    let (q5, _) = candle_weights(rows, 1568, GgmlDType::Q5_0, 25);
    let q5_panels = Q5_0Panels::from_qtensor(&q5).unwrap();
    let q5k_panels = Q5KPanels::from_qtensor(&candle_weights(rows, 1536, GgmlDType::Q5K, 26).0).unwrap();
    for level in cpu_level().with_lower_levels() {
        let mut products: Vec<Product> = vec![
            ("Q4_K", 1536, Box::new(|x, m, out| q4.matmul_at(level, x, m, out))),
            ("Q6_K", 1536, Box::new(|x, m, out| q6.matmul_at(level, x, m, out))),
            ("Q8_0", 1568, Box::new(|x, m, out| q8.matmul_at(level, x, m, out))),
        ];
        products.push(("Q4_K panels", 1536, Box::new(|x, m, out| q4_panels.matmul_at(level, x, m, out))));
        products.push(("Q5_0 panels", 1568, Box::new(|x, m, out| q5_panels.matmul_at(level, x, m, out))));
        products.push(("Q5_K panels", 1536, Box::new(|x, m, out| q5k_panels.matmul_at(level, x, m, out))));
        if level == CpuLevel::Avx512Vnni {
            products.push(("Q6_K panels", 1536, Box::new(|x, m, out| q6_panels.matmul_at(level, x, m, out))));
        }
        for (name, cols, product) in products {
            let input = random_values(m * cols, 21);
            let mut batched = vec![f32::NAN; m * rows];
            product(&input, m, &mut batched);
            for i in 0..m {
                let mut single = vec![f32::NAN; rows];
                product(&input[i * cols..(i + 1) * cols], 1, &mut single);
                let same =
                    single.iter().zip(&batched[i * rows..(i + 1) * rows]).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{level:?} {name}: activation row {i} differs between a batch of {m} and alone");
            }
        }
    }
}

/// A step that needs only some logits: each kernel's product with a few weight rows (runs of consecutive rows,
/// single rows, the first and the last; rows in one panel and across panels) has the bits its whole product
/// gives those rows, at every level, and leaves the other outputs as they were.
#[test]
fn some_rows_equal_the_whole_product_bit_for_bit() {
    let rows = 70;
    let picked: Vec<u32> = vec![0, 1, 2, 9, 16, 17, 31, 32, 33, 50, 69];
    let q4 = Q4KMatrix::from_qtensor(&candle_weights(rows, 1536, GgmlDType::Q4K, 33).0).unwrap();
    let q6 = Q6KMatrix::from_qtensor(&candle_weights(rows, 1536, GgmlDType::Q6K, 31).0).unwrap();
    let q8 = Q8_0Matrix::quantize(rows, 1568, &random_values(rows * 1568, 32));
    let (q4_panels, q6_panels) = (Q4KPanels::from_rows(&q4), Q6KPanels::from_rows(&q6));
    let q5_panels = Q5_0Panels::from_qtensor(&candle_weights(rows, 1568, GgmlDType::Q5_0, 36).0).unwrap();
    let q5k_panels = Q5KPanels::from_qtensor(&candle_weights(rows, 1536, GgmlDType::Q5K, 37).0).unwrap();
    for level in cpu_level().with_lower_levels() {
        let mut products: Vec<(&str, usize, Both)> = vec![
            (
                "Q6_K",
                1536,
                (Box::new(|x, o| q6.matmul_at(level, x, 1, o)), Box::new(|x, r, o| q6.matvec_rows_at(level, x, r, o))),
            ),
            (
                "Q8_0",
                1568,
                (Box::new(|x, o| q8.matmul_at(level, x, 1, o)), Box::new(|x, r, o| q8.matvec_rows_at(level, x, r, o))),
            ),
        ];
        // The panels compute the panels holding the wanted rows, whole.
        if level >= Q4KPanels::MIN_LEVEL {
            products.push((
                "Q4_K panels",
                1536,
                (
                    Box::new(|x, o| q4_panels.matmul_at(level, x, 1, o)),
                    Box::new(|x, r, o| q4_panels.matvec_rows_at(level, x, r, o)),
                ),
            ));
        }
        if level >= Q5_0Panels::MIN_LEVEL {
            products.push((
                "Q5_0 panels",
                1568,
                (
                    Box::new(|x, o| q5_panels.matmul_at(level, x, 1, o)),
                    Box::new(|x, r, o| q5_panels.matvec_rows_at(level, x, r, o)),
                ),
            ));
        }
        if level >= Q5KPanels::MIN_LEVEL {
            products.push((
                "Q5_K panels",
                1536,
                (
                    Box::new(|x, o| q5k_panels.matmul_at(level, x, 1, o)),
                    Box::new(|x, r, o| q5k_panels.matvec_rows_at(level, x, r, o)),
                ),
            ));
        }
        if level >= Q6KPanels::MIN_LEVEL {
            products.push((
                "Q6_K panels",
                1536,
                (
                    Box::new(|x, o| q6_panels.matmul_at(level, x, 1, o)),
                    Box::new(|x, r, o| q6_panels.matvec_rows_at(level, x, r, o)),
                ),
            ));
        }
        for (name, cols, (whole, some)) in products {
            let input = random_values(cols, 34);
            let mut all = vec![f32::NAN; rows];
            whole(&input, &mut all);
            let mut few = vec![-7.0f32; rows];
            some(&input, &picked, &mut few);
            for r in 0..rows {
                let expected = if picked.contains(&(r as u32)) { all[r] } else { -7.0 };
                assert_eq!(few[r].to_bits(), expected.to_bits(), "{level:?} {name}: row {r}");
            }
        }
    }
}

/// A whole product of one input row and one of some weight rows: `(input, out)` and `(input, rows, out)`.
type Both<'a> = (Box<dyn Fn(&[f32], &mut [f32]) + 'a>, Box<dyn Fn(&[f32], &[u32], &mut [f32]) + 'a>);

/// A named product of a weight matrix of the given width: `(input, m, out)`.
type Product<'a> = (&'static str, usize, Box<dyn Fn(&[f32], usize, &mut [f32]) + 'a>);

/// The largest integers the kernels meet: every weight at its maximum (Q4_K 15 and Q5_K 31 with scale and minimum
/// 63 — Q5_K's pair sums of 2 · 31 · 127 = 7,874, four words of them in an AVX2 i16 chain — Q6_K 63 with scale ±127 — pair sums of 2 · 63 · 127 = 16,002 in the kernels' 16-bit lanes, and i16 × scale
/// products summed in i32) against activations of ±127.
#[test]
fn k_quant_kernels_hold_the_extremes() {
    let one = half::f16::from_f32(0.01).to_le_bytes();
    let mut q4_block = [0xFFu8; 144];
    q4_block[..2].copy_from_slice(&one);
    q4_block[2..4].copy_from_slice(&one);
    let mut q6_block = vec![0xFFu8; 210];
    for (g, scale) in q6_block[192..208].iter_mut().enumerate() {
        *scale = if g % 3 == 0 { 0x81 } else { 0x7F }; // −127 and 127
    }
    q6_block[208..].copy_from_slice(&one);
    let (rows, cols) = (17, 512);
    let q4 = Q4KMatrix::from_gguf_bytes(rows, cols, &q4_block.repeat(rows * cols / 256)).unwrap();
    let mut q5_block = [0xFFu8; 176];
    q5_block[..2].copy_from_slice(&one);
    q5_block[2..4].copy_from_slice(&one);
    let q5 = Q5KMatrix::from_gguf_bytes(rows, cols, &q5_block.repeat(rows * cols / 256)).unwrap();
    let q6 = Q6KMatrix::from_gguf_bytes(rows, cols, &q6_block.repeat(rows * cols / 256)).unwrap();
    // 9 rows: the kernels as in a decode pass; 18: the AVX2 Q6_K kernel on its weights unpacked to bytes.
    for m in [9, 18] {
        let input: Vec<f32> = (0..m * cols).map(|i| if (i / cols) % 2 == 0 { 3.0 } else { -3.0 }).collect();
        assert_k_quant_kernels_match(&q4, &q5, &q6, &input, m);
    }
}

/// Our K-quant products against candle's on the same weights: decode (1 row), prefill (several, an odd count),
/// and a matrix whose last panel is part full; Q5_K through what `QLinear::new` picks (its panels where this CPU
/// has our kernels).
#[rstest]
#[case(GgmlDType::Q4K, 32, 3)]
#[case(GgmlDType::Q6K, 32, 3)]
#[case(GgmlDType::Q5K, 32, 1)]
#[case(GgmlDType::Q5K, 37, 7)]
fn k_quants_match_candles_matmul(#[case] dtype: GgmlDType, #[case] rows: usize, #[case] m: usize) {
    let cols = 1536;
    let q = std::sync::Arc::new(candle_weights(rows, cols, dtype, 13).0);
    let ours: QLinear = match dtype {
        GgmlDType::Q4K => QLinear::Ours(std::sync::Arc::new(Q4KMatrix::from_qtensor(&q).unwrap())),
        GgmlDType::Q5K => QLinear::from_arc(q.clone()).unwrap(),
        _ => QLinear::Ours(std::sync::Arc::new(Q6KMatrix::from_qtensor(&q).unwrap())),
    };
    if dtype == GgmlDType::Q5K && Q5KPanels::supported() {
        assert_eq!(ours.kernel_name(), "tandem-q5_k-panels");
    }
    let theirs = QMatMul::from_arc(q).unwrap();
    let x = Tensor::from_vec(random_values(m * cols, 14), (m, cols), &Device::Cpu).unwrap();
    let a = ours.forward(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = theirs.forward(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    // Both quantize activations to int8 per 256; rounding of the scales differs slightly.
    let err = relative_error(&a, &b);
    assert!(err < 2e-3, "{dtype:?}: relative error {err}");
}

#[test]
fn k_quant_layout_errors_name_the_problem() {
    let err = Q4KMatrix::from_gguf_bytes(1, 128, &[0; 72]).unwrap_err().to_string();
    assert!(err.contains("not a multiple of 256"), "{err}");
    let err = Q6KMatrix::from_gguf_bytes(2, 256, &[0; 210]).unwrap_err().to_string();
    assert!(err.contains("210 bytes") && err.contains("expected 420"), "{err}");
    let err = Q5KPanels::from_gguf_bytes(2, 256, &[0; 176]).unwrap_err().to_string();
    assert!(err.contains("Q5K data of 176 bytes") && err.contains("expected 352"), "{err}");
}

/// `TANDEM_CPU_ISA` names an instruction set for our kernels: an unknown name, or one this CPU lacks, is refused
/// with exit code 2 before anything loads, naming what the CPU has; one it has is accepted.
#[test]
fn cpu_isa_override_is_checked_before_anything_runs() {
    let tandem = |isa: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(["tools", "list"])
            .env("TANDEM_CPU_ISA", isa)
            .env_remove("TANDEM_MCP")
            .output()
            .expect("run tandem")
    };
    let unknown = tandem("sse9");
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(said.contains("TANDEM_CPU_ISA=sse9") && said.contains("avx512, avxvnni, avx2, scalar"), "{said}");
    let scalar = tandem("scalar");
    assert!(scalar.status.success(), "every CPU runs the scalar path: {scalar:?}");
    let detected = tandem::kernels::detected_level();
    for (name, level) in [("avx2", CpuLevel::Avx2), ("avxvnni", CpuLevel::AvxVnni), ("avx512", CpuLevel::Avx512Vnni)] {
        let output = tandem(name);
        let runs = level <= detected && (level != CpuLevel::AvxVnni || tandem::kernels::has_avx_vnni());
        if runs {
            assert!(output.status.success(), "{name} on a {detected:?} CPU: {output:?}");
        } else {
            assert_eq!(output.status.code(), Some(2), "{name} on a {detected:?} CPU: {output:?}");
            assert!(String::from_utf8_lossy(&output.stderr).contains("this CPU lacks it"), "{output:?}");
        }
    }
}
