//! Our quantized matmul kernels against the scalar reference and against candle's own Q8_0 path.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rstest::rstest;
use tandem::kernels::q8_0::{reference_matmul, Q8_0Matrix};
use tandem::kernels::{cpu_level, CpuLevel, QLinear};

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
fn fast_kernel_matches_the_reference(#[case] rows: usize, #[case] cols: usize, #[case] m: usize) {
    let weight = Q8_0Matrix::quantize(rows, cols, &random_values(rows * cols, 1));
    let input = random_values(m * cols, 2);
    let mut fast = vec![f32::NAN; m * rows];
    weight.matmul(&input, m, &mut fast);
    let reference = reference_matmul(&weight, &input, m);
    // Integer dot products are exact; only the order of the f32 sums differs.
    let err = relative_error(&fast, &reference);
    assert!(err < 1e-5, "{rows}x{cols}, m={m}: relative error {err}");
    assert!(fast.iter().all(|x| x.is_finite()), "every output written");
}

#[test]
fn matches_candles_q8_0_matmul_on_the_same_weights() {
    let (rows, cols, m) = (48, 896, 5);
    let device = Device::Cpu;
    let dense = Tensor::from_vec(random_values(rows * cols, 3), (rows, cols), &device).unwrap();
    let qtensor = QTensor::quantize(&dense, GgmlDType::Q8_0).unwrap();
    let ours = QLinear::Q8_0(Q8_0Matrix::from_qtensor(&qtensor).unwrap().into());
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
    let picked = ours.dequantize_rows(&[4, 0, 4]).unwrap();
    assert_eq!(&picked[..cols], &expected[4][..]);
    assert_eq!(&picked[cols..2 * cols], &expected[0][..]);
    assert_eq!(&picked[2 * cols..], &expected[4][..]);
    let linear = QLinear::Q8_0(ours.into());
    let ids = Tensor::new(&[[1u32, 5]], &device).unwrap();
    let embedded = linear.embedding(&ids).unwrap();
    assert_eq!(embedded.dims(), &[1, 2, cols]);
    assert_eq!(embedded.get(0).unwrap().get(1).unwrap().to_vec1::<f32>().unwrap(), expected[5]);
}

#[test]
fn rejects_bad_shapes_and_ids_with_a_message() {
    let err = Q8_0Matrix::from_gguf_bytes(2, 48, &[0; 2 * 48 / 32 * 34]).unwrap_err().to_string();
    assert!(err.contains("not a multiple of 32"), "{err}");
    let err = Q8_0Matrix::from_gguf_bytes(2, 64, &[0; 100]).unwrap_err().to_string();
    assert!(err.contains("100 bytes") && err.contains("expected 136"), "{err}");
    let matrix = Q8_0Matrix::quantize(2, 32, &random_values(64, 6));
    let err = matrix.dequantize_rows(&[2]).unwrap_err().to_string();
    assert!(err.contains("token id 2"), "{err}");
}

#[test]
fn q8_0_weights_take_our_kernel_where_the_cpu_has_one() {
    let dense = Tensor::from_vec(random_values(16 * 64, 7), (16, 64), &Device::Cpu).unwrap();
    let q8 = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q8_0).unwrap()).unwrap();
    let q4 = QLinear::new(QTensor::quantize(&dense, GgmlDType::Q4_0).unwrap()).unwrap();
    let expected = if cpu_level() == CpuLevel::Avx2 { "tandem-q8_0" } else { "candle" };
    assert_eq!(q8.kernel_name(), expected);
    assert_eq!(q4.kernel_name(), "candle", "types without a kernel of ours stay on candle's");
}

#[test]
fn q5_0_widens_to_int8_exactly() {
    let (rows, cols) = (5, 96);
    let device = Device::Cpu;
    let dense = Tensor::from_vec(random_values(rows * cols, 8), (rows, cols), &device).unwrap();
    let q5 = QTensor::quantize(&dense, GgmlDType::Q5_0).unwrap();
    let expected: Vec<f32> = q5.dequantize(&device).unwrap().flatten_all().unwrap().to_vec1().unwrap();
    let ours = Q8_0Matrix::from_q5_0(&q5).unwrap();
    let ids: Vec<u32> = (0..rows as u32).collect();
    assert_eq!(ours.dequantize_rows(&ids).unwrap(), expected, "same values as candle's Q5_0 dequantization");
    let err = Q8_0Matrix::from_q5_0_bytes(1, 32, &[0; 21]).unwrap_err().to_string();
    assert!(err.contains("Q5_0 data of 21 bytes") && err.contains("expected 22"), "{err}");
}
