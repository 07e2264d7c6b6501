//! Loading GGUF files: our Qwen2 forward pass against candle-transformers' reference, KV cache behaviour,
//! and the errors a user sees for broken files. Uses tiny synthetic models the tests write themselves.

use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::{Device, Tensor};
use tandem::decode::Model;
use tandem::llm::decoder::Decoder;
use tandem::llm::gguf::{GgufFile, LoadError};
use tandem::llm::{LanguageModel, LoadOptions};
use tandem::Error;

use crate::common::tiny::{write_tiny_qwen2, TinyQwen2};

fn tiny_file(dir: &tempfile::TempDir, name: &str, spec: &TinyQwen2) -> PathBuf {
    let path = dir.path().join(name);
    write_tiny_qwen2(&path, spec);
    path
}

fn load_qwen2(path: &Path, keep_types: bool) -> Decoder {
    let file = GgufFile::open(path).unwrap();
    let mut conversions = Vec::new();
    Decoder::load(
        &file,
        tandem::llm::decoder::family("qwen2").unwrap(),
        &Device::Cpu,
        &LoadOptions { keep_tensor_types: keep_types, ..LoadOptions::default() },
        &mut conversions,
    )
    .unwrap()
}

/// `‖other − reference‖ / ‖reference‖`.
fn relative_rms(reference: &Tensor, other: &Tensor) -> f32 {
    let a = reference.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = other.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let diff: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
    let norm: f32 = a.iter().map(|x| x * x).sum();
    (diff / norm.max(1e-12)).sqrt()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(a.len(), b.len());
    a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Our Qwen2 and candle-transformers' own, both loaded from `path`.
fn ours_and_reference(path: &std::path::Path) -> (Decoder, candle_transformers::models::quantized_qwen2::ModelWeights) {
    let mut reader = std::fs::File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let reference =
        candle_transformers::models::quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu)
            .unwrap();
    (load_qwen2(path, true), reference)
}

const TOKENS: [u32; 9] = [5, 77, 256, 13, 200, 31, 99, 257, 42];

/// Every weight type our kernels take (Q8_0, Q5_0, Q4_K, Q5_K, Q6_K, F16, BF16; K-quants need widths of 256) against
/// candle-transformers' own Qwen2 on candle's kernels.
#[rstest::rstest]
#[case(GgmlDType::Q8_0, 64, 128)]
#[case(GgmlDType::Q5_0, 64, 128)]
#[case(GgmlDType::Q4K, 256, 512)]
#[case(GgmlDType::Q5K, 256, 512)]
#[case(GgmlDType::Q6K, 256, 512)]
#[case(GgmlDType::F16, 64, 128)]
#[case(GgmlDType::BF16, 64, 128)]
fn forward_matches_candle_reference_implementation(
    #[case] matrix_type: GgmlDType,
    #[case] hidden: usize,
    #[case] ffn: usize,
) {
    let dir = tempfile::tempdir().unwrap();
    let spec = TinyQwen2 { matrix_type, hidden, ffn, ..TinyQwen2::default() };
    let path = tiny_file(&dir, "ref.gguf", &spec);
    let (mut ours, mut reference) = ours_and_reference(&path);
    // Prompt in one pass, then two single-token steps: exercises the mask, the cache and RoPE offsets.
    let prompt = &TOKENS[..6];
    let ref_logits = reference.forward(&Tensor::new(prompt, &Device::Cpu).unwrap().unsqueeze(0).unwrap(), 0).unwrap();
    let our_logits = ours.forward(prompt, 0).unwrap();
    // Both quantize activations to int8 between layers. Kernels that add in another order (ours on AVX-512 VNNI
    // against candle's AVX2 ones) differ by ~1e-7, but such a difference can flip the rounding of one int8
    // activation, which moves the logits by ~1 % (measured: 1.4 % on one step). A wiring error (a wrong scale,
    // sub-block or offset) moves them by tens of percent; the bound sits between the two.
    let tolerance = 3e-2;
    let err = relative_rms(&ref_logits, &our_logits);
    assert!(err < tolerance, "{matrix_type:?}: prefill logits differ by {err} (relative RMS)");
    for (i, &t) in TOKENS[6..].iter().enumerate() {
        let pos = 6 + i;
        let r = reference.forward(&Tensor::new(&[t], &Device::Cpu).unwrap().unsqueeze(0).unwrap(), pos).unwrap();
        let o = ours.forward(&[t], pos).unwrap();
        let err = relative_rms(&r, &o);
        assert!(err < tolerance, "{matrix_type:?}: logits at step {pos} differ by {err} (relative RMS)");
    }
}

/// Past the first 4096 positions (where our RoPE tables grow), in 512-token chunks as a long prompt is fed,
/// against candle-transformers' Qwen2 (whose tables cover the whole context from the start).
#[test]
fn positions_past_the_first_rope_tables_match_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TinyQwen2 { context: 8192, ..TinyQwen2::default() };
    let path = tiny_file(&dir, "long.gguf", &spec);
    let (mut ours, mut reference) = ours_and_reference(&path);
    let tokens: Vec<u32> = (0..4200u32).map(|i| i * 37 % 250).collect();
    for start in (0..tokens.len()).step_by(512) {
        let chunk = &tokens[start..(start + 512).min(tokens.len())];
        let r = reference.forward(&Tensor::new(chunk, &Device::Cpu).unwrap().unsqueeze(0).unwrap(), start).unwrap();
        let o = ours.forward(chunk, start).unwrap();
        let err = relative_rms(&r, &o);
        assert!(err < 3e-2, "logits after the chunk at {start} differ by {err} (relative RMS)");
    }
}

#[test]
fn incremental_decoding_equals_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_file(&dir, "inc.gguf", &TinyQwen2::default());
    let mut model = load_qwen2(&path, false);
    let whole = model.forward(&TOKENS, 0).unwrap();
    model.clear_kv_cache();
    let mut last = None;
    model.forward(&TOKENS[..3], 0).unwrap();
    for (i, &t) in TOKENS[3..].iter().enumerate() {
        last = Some(model.forward(&[t], 3 + i).unwrap());
    }
    assert!(max_abs_diff(&whole, &last.unwrap()) < 1e-4);
}

#[test]
fn rewinding_the_cache_reuses_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_file(&dir, "rewind.gguf", &TinyQwen2::default());
    let mut model = load_qwen2(&path, false);
    let fresh = model.forward(&[1, 2, 3, 4, 50, 60], 0).unwrap();
    // Another continuation of the same 4-token prefix, then rewind to the prefix and take the first one again:
    // the rectangular mask after a cached prefix must give the same logits as a fresh pass.
    model.clear_kv_cache();
    model.forward(&[1, 2, 3, 4, 9, 9, 9], 0).unwrap();
    let reused = model.forward(&[50, 60], 4).unwrap();
    assert!(max_abs_diff(&fresh, &reused) < 1e-4);
}

#[test]
fn q5_0_weights_are_converted_and_stay_close() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TinyQwen2 { matrix_type: GgmlDType::Q5_0, ..TinyQwen2::default() };
    let path = tiny_file(&dir, "q5.gguf", &spec);
    let file = GgufFile::open(&path).unwrap();
    let mut conversions = Vec::new();
    let mut converted = Decoder::load(
        &file,
        tandem::llm::decoder::family("qwen2").unwrap(),
        &Device::Cpu,
        &LoadOptions::default(),
        &mut conversions,
    )
    .unwrap();
    if tandem::kernels::Q5_0Panels::supported() {
        assert!(conversions.is_empty(), "kept at five bits, as panels: {conversions:?}");
    } else if tandem::kernels::cpu_level() >= tandem::kernels::CpuLevel::Avx2 {
        assert_eq!(conversions.len(), 1, "{conversions:?}");
        assert!(conversions[0].contains("Q5_0→int8 (exact"), "widened for our int8 kernel: {conversions:?}");
    } else {
        assert_eq!(conversions.len(), 1, "{conversions:?}");
        assert!(conversions[0].contains("Q5_0/Q5_1→Q8_0"), "{conversions:?}");
    }
    let mut original = load_qwen2(&path, true);
    let a = converted.forward(&TOKENS, 0).unwrap();
    let b = original.forward(&TOKENS, 0).unwrap();
    let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(max_abs_diff(&a, &b) < 0.05 * scale.max(1.0), "diff {} vs scale {scale}", max_abs_diff(&a, &b));
}

/// Q5_1 matrices are requantized to Q8_0 once at load on every CPU (docs/models.md's quantization table), and the
/// model stays close to the same file read as stored.
#[test]
fn q5_1_weights_are_requantized_to_q8_0() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TinyQwen2 { matrix_type: GgmlDType::Q5_1, ..TinyQwen2::default() };
    let path = tiny_file(&dir, "q5_1.gguf", &spec);
    let file = GgufFile::open(&path).unwrap();
    let mut conversions = Vec::new();
    let family = tandem::llm::decoder::family("qwen2").unwrap();
    let mut converted = Decoder::load(&file, family, &Device::Cpu, &LoadOptions::default(), &mut conversions).unwrap();
    assert_eq!(conversions.len(), 1, "{conversions:?}");
    assert!(conversions[0].starts_with("Q5_0/Q5_1→Q8_0: "), "{conversions:?}");
    let mut original = load_qwen2(&path, true);
    let a = converted.forward(&TOKENS, 0).unwrap();
    let b = original.forward(&TOKENS, 0).unwrap();
    let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(max_abs_diff(&a, &b) < 0.05 * scale.max(1.0), "diff {} vs scale {scale}", max_abs_diff(&a, &b));
}

#[test]
fn tied_output_uses_the_embedding() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TinyQwen2 { separate_output: false, ..TinyQwen2::default() };
    let path = tiny_file(&dir, "tied.gguf", &spec);
    let mut model = load_qwen2(&path, false);
    let logits = model.forward(&TOKENS[..2], 0).unwrap();
    assert_eq!(logits.dims1().unwrap(), model.n_logits());
}

fn load_error(path: &Path) -> Error {
    match Model::load(path, &Device::Cpu, &LoadOptions::default()) {
        Ok(_) => panic!("{} loaded but should not", path.display()),
        Err(e) => e,
    }
}

#[test]
fn truncated_file_names_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_file(&dir, "trunc.gguf", &TinyQwen2::default());
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len - 100).unwrap();
    let err = load_error(&path);
    assert!(matches!(err, Error::Load(LoadError::Truncated { .. })), "{err:?}");
    assert!(err.to_string().contains("trunc.gguf"), "{err}");
}

#[test]
fn file_cut_inside_the_header_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_file(&dir, "header.gguf", &TinyQwen2::default());
    let bytes = std::fs::read(&path).unwrap();
    for cut in [4usize, 11, 100, 2000] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let err = load_error(&path);
        assert!(matches!(err, Error::Load(LoadError::BadHeader { .. })), "cut at {cut}: {err:?}");
    }
}

#[test]
fn bad_magic_says_it_is_not_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors.gguf");
    std::fs::write(&path, b"{\"__metadata__\": {}}").unwrap();
    let err = load_error(&path);
    assert!(matches!(err, Error::Load(LoadError::BadMagic { .. })), "{err:?}");
    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(load_error(&empty), Error::Load(LoadError::BadMagic { .. })));
}

#[test]
fn missing_metadata_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TinyQwen2 { omit_keys: vec!["qwen2.block_count".into()], ..TinyQwen2::default() };
    let path = tiny_file(&dir, "nokey.gguf", &spec);
    let err = load_error(&path);
    match &err {
        Error::Load(LoadError::MissingKey { key, .. }) => assert_eq!(key, "qwen2.block_count"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
}

#[test]
fn unknown_architecture_lists_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TinyQwen2 { architecture: "mamba9".into(), ..TinyQwen2::default() };
    let path = tiny_file(&dir, "arch.gguf", &spec);
    let err = load_error(&path);
    assert!(matches!(err, Error::Load(LoadError::UnsupportedArchitecture { .. })), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("mamba9") && text.contains("qwen2") && text.contains("gemma3"), "{text}");
}

#[test]
fn missing_file_is_a_clear_error() {
    let err = load_error(Path::new("/nonexistent/model.gguf"));
    assert!(matches!(err, Error::Load(LoadError::Open { .. })), "{err:?}");
}

/// A tiny model whose widths are whole K-quant blocks (256), so Q4_K matrices can be written too.
/// Found by the `gguf` fuzz target (the file is its minimized input, kept as a seed): a tensor whose dimensions
/// multiply past `usize::MAX` panicked with overflow checks on. Without them the product wraps; the second file
/// (the same with dimensions `[2^32, 2^32]` at offset 0) wrapped to 0 elements, which passed the bounds check and
/// was handed out as a tensor of 2^64 floats in 0 bytes. Both must be refused, naming the file and the tensor.
#[test]
fn tensor_dimensions_whose_product_overflows_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8]); 2] = [
        ("dims_overflow.gguf", include_bytes!("../../fuzz/seeds/gguf/dims_overflow.gguf")),
        ("dims_overflow_wraps_to_zero.gguf", include_bytes!("../../fuzz/seeds/gguf/dims_overflow_wraps_to_zero.gguf")),
    ];
    for (name, bytes) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let file = GgufFile::open(&path).unwrap();
        for error in [
            file.tensor_layout("blk.0.attn_q.weight").unwrap_err(),
            file.tensor("blk.0.attn_q.weight", &Device::Cpu).unwrap_err(),
        ] {
            assert!(
                matches!(&error, LoadError::BadTensor { message, .. } if message.contains("multiply to more elements")),
                "{name}: {error:?}"
            );
            assert!(error.to_string().contains(name) && error.to_string().contains("blk.0.attn_q.weight"), "{error}");
        }
    }
}

/// Found by the `gguf` fuzz target (the file is its input, kept as a seed): a header whose `general.alignment` is 0
/// made candle's reader divide by zero, a panic. It must be a bad-header error that names the file.
#[test]
fn a_header_with_alignment_zero_is_a_bad_header_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alignment_zero.gguf");
    std::fs::write(&path, include_bytes!("../../fuzz/seeds/gguf/alignment_zero.gguf")).unwrap();
    let error = GgufFile::open(&path).err().expect("a bad header");
    assert!(matches!(&error, LoadError::BadHeader { message, .. } if message.contains("divide by zero")), "{error:?}");
    assert!(error.to_string().contains("alignment_zero.gguf"), "{error}");
}

/// A malformed file whose embedding table has no dimensions: the load reads the table's width on its way (for
/// the grammar engine's token table, beside the weights), and that read must not index past an empty shape. The
/// load must fail with an error naming the table, not panic.
#[test]
fn an_embedding_table_without_dimensions_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_file(&dir, "scalar_embedding.gguf", &TinyQwen2::default());
    // candle writes no tensor without dimensions, so the file is edited: the table's two dimensions (a u32 count
    // and two u64s) become a count of 0, and the 16 bytes this takes out of the header go into the model's name,
    // which comes before, so that every offset after it stays where it was.
    let mut bytes = std::fs::read(&path).unwrap();
    let find = |bytes: &[u8], needle: &[u8]| bytes.windows(needle.len()).position(|w| w == needle).unwrap();
    let name = b"tiny test model";
    let at = find(&bytes, name);
    bytes[at - 8..at].copy_from_slice(&((name.len() + 16) as u64).to_le_bytes());
    bytes.splice(at + name.len()..at + name.len(), *b" (no dimensions)");
    let table = find(&bytes, b"token_embd.weight") + b"token_embd.weight".len();
    assert_eq!(bytes[table..table + 4], 2u32.to_le_bytes(), "two dimensions");
    bytes.splice(table..table + 20, 0u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.content.tensor_infos["token_embd.weight"].shape.dims(), &[] as &[usize], "the file is as meant");
    let error = std::panic::catch_unwind(|| load_error(&path)).expect("an error, not a panic");
    assert!(error.to_string().contains("token_embd.weight"), "{error}");
}

/// Found by the `gguf` fuzz target (the file is its input, kept as a seed): a tensor whose data starts off an
/// 8-byte boundary was handed to candle, which reads it in place as blocks: an unaligned `slice::from_raw_parts`,
/// undefined behaviour (a panic with debug assertions, a silent misaligned read without). It must be refused.
#[test]
fn a_tensor_whose_data_is_not_8_byte_aligned_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unaligned_tensor.gguf");
    std::fs::write(&path, include_bytes!("../../fuzz/seeds/gguf/unaligned_tensor.gguf")).unwrap();
    let file = GgufFile::open(&path).unwrap();
    let names: Vec<String> = file.content.tensor_infos.keys().cloned().collect();
    let refused = names
        .iter()
        .filter(|name| {
            matches!(file.tensor(name, &Device::Cpu), Err(LoadError::BadTensor { message, .. }) if message.contains("not a multiple of 8"))
        })
        .count();
    assert!(refused >= 1, "no tensor of {names:?} refused as unaligned");
}

fn stackable_tiny(dir: &tempfile::TempDir, matrix_type: GgmlDType) -> GgufFile {
    let spec = TinyQwen2 { matrix_type, hidden: 256, n_head: 4, n_kv_head: 2, ffn: 512, ..TinyQwen2::default() };
    GgufFile::open(&tiny_file(dir, &format!("stackable-{matrix_type:?}.gguf"), &spec)).unwrap()
}

/// Matrices of one type and width stack into one whose rows are theirs, in order (what the stacked Q/K/V and
/// gate/up projections load); other widths do not stack.
#[test]
fn stacked_rows_are_the_parts_rows_in_order() {
    let dir = tempfile::tempdir().unwrap();
    for matrix_type in [GgmlDType::Q8_0, GgmlDType::Q4K] {
        let file = stackable_tiny(&dir, matrix_type);
        let names = ["blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"];
        let stacked = file.stacked_rows(&names, &Device::Cpu).unwrap().expect("same type and width");
        let parts: Vec<Tensor> =
            names.iter().map(|n| file.tensor(n, &Device::Cpu).unwrap().dequantize(&Device::Cpu).unwrap()).collect();
        let expected = Tensor::cat(&parts, 0).unwrap();
        let got = stacked.dequantize(&Device::Cpu).unwrap();
        assert_eq!(got.dims(), expected.dims());
        let diff = (got - expected).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert_eq!(diff, 0.0, "{matrix_type:?}: stacked rows differ from the parts'");
        // ffn_down is [hidden, ffn]: another width than attn_q's [hidden, hidden].
        let mixed = file.stacked_rows(&["blk.0.attn_q.weight", "blk.0.ffn_down.weight"], &Device::Cpu).unwrap();
        assert!(mixed.is_none(), "different widths must not stack");
    }
}

/// Stacked Q/K/V and gate/up matmuls (the GPU default) give exactly the logits of separate ones, for a prompt
/// and a decode step after it: every output row is computed as before, only the split differs.
#[test]
fn stacked_projections_give_the_same_logits() {
    let dir = tempfile::tempdir().unwrap();
    for matrix_type in [GgmlDType::Q8_0, GgmlDType::Q4K] {
        let file = stackable_tiny(&dir, matrix_type);
        let run = |stack: bool| {
            let options = LoadOptions { stack_projections: Some(stack), ..LoadOptions::default() };
            let mut model = Decoder::load(
                &file,
                tandem::llm::decoder::family("qwen2").unwrap(),
                &Device::Cpu,
                &options,
                &mut Vec::new(),
            )
            .unwrap();
            let prompt = model.forward(&TOKENS[..4], 0).unwrap();
            let step = model.forward(&TOKENS[4..5], 4).unwrap();
            (prompt, step)
        };
        let (separate, stacked) = (run(false), run(true));
        assert_eq!(max_abs_diff(&separate.0, &stacked.0), 0.0, "{matrix_type:?}: prompt logits differ");
        assert_eq!(max_abs_diff(&separate.1, &stacked.1), 0.0, "{matrix_type:?}: decode logits differ");
    }
}

#[test]
fn an_untied_embedding_is_read_from_the_mapped_file_row_by_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_file(&dir, "mapped.gguf", &TinyQwen2::default());
    let file = GgufFile::open(&path).unwrap();
    let mapped = file.mapped_rows("token_embd.weight").unwrap();
    let loaded = file.tensor("token_embd.weight", &Device::Cpu).unwrap().dequantize(&Device::Cpu).unwrap();
    assert_eq!((mapped.rows(), mapped.cols()), loaded.dims2().unwrap());
    let last = mapped.rows() as u32 - 1;
    let ids = Tensor::new(&[[3u32, 0, last, 3]], &Device::Cpu).unwrap();
    // The file is no longer needed: the table keeps its own reference to the mapping.
    drop(file);
    let rows = mapped.lookup(&ids).unwrap();
    assert_eq!(rows.dims(), [1, 4, mapped.cols()]);
    let expected = loaded.index_select(&Tensor::new(&[3u32, 0, last, 3], &Device::Cpu).unwrap(), 0).unwrap();
    assert_eq!(rows.squeeze(0).unwrap().to_vec2::<f32>().unwrap(), expected.to_vec2::<f32>().unwrap());
    let past = Tensor::new(&[last + 1], &Device::Cpu).unwrap();
    let error = mapped.lookup(&past).unwrap_err().to_string();
    assert!(error.contains("outside the embedding"), "{error}");
}

/// A fault sweep over a model file: cut at 64 offsets spread over the whole file (header, tensor index, data) and
/// 256 single bytes flipped at seeded positions. A cut file is always refused with an error naming the file; a
/// flipped byte is refused or loads (a flipped weight is still a weight), and nothing panics: a forward pass of
/// whatever loads runs too.
#[test]
fn cut_and_flipped_model_files_fail_cleanly_or_load_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_file(&dir, "sweep.gguf", &TinyQwen2::default());
    let bytes = std::fs::read(&path).unwrap();
    let damaged = dir.path().join("damaged.gguf");
    let attempt = |content: &[u8]| {
        std::fs::write(&damaged, content).unwrap();
        std::panic::catch_unwind(|| match Model::load(&damaged, &Device::Cpu, &LoadOptions::default()) {
            Ok(mut model) => model.weights.forward(&TOKENS[..2], 0).map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        })
    };
    for i in 0..64 {
        let cut = bytes.len() * i / 64;
        match attempt(&bytes[..cut]) {
            Ok(Err(message)) => assert!(message.contains("damaged.gguf"), "cut at {cut}: {message}"),
            Ok(Ok(())) => panic!("a file cut at {cut} of {} bytes loaded", bytes.len()),
            Err(_) => panic!("a file cut at {cut} panicked"),
        }
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let (mut refused, mut loaded) = (0, 0);
    for _ in 0..256 {
        // xorshift: a fixed sequence of positions, the same on every run.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let at = (state % bytes.len() as u64) as usize;
        let mut flipped = bytes.clone();
        flipped[at] ^= 0xff;
        match attempt(&flipped) {
            Ok(Ok(())) => loaded += 1,
            Ok(Err(_)) => refused += 1,
            Err(_) => panic!("flipping byte {at} of {} made loading or a forward pass panic", bytes.len()),
        }
    }
    assert_eq!(refused + loaded, 256);
    eprintln!("model-file sweep: 64 cuts refused; 256 flips: {refused} refused, {loaded} loaded and ran");
}
