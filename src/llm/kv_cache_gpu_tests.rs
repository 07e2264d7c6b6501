//! The CUDA pass attention (`kernels::gpu_attention`) against candle's attention route, part by part, on real KV
//! caches: built only for tests with `--features cuda`, run on a GPU (`TESTS=1 scripts/build-cuda.sh`).

use candle_core::{Device, Tensor};

use crate::kernels::attention::candle_attention;
use crate::kernels::attention::tests::values;
use crate::kernels::gpu::device_address;
use crate::kernels::gpu_attention::{PartCache, PassTable};
use crate::llm::kv_cache::KvCache;
use candle_core::DType;

fn causal_mask(seq: usize, pos: usize, device: &Device) -> Tensor {
    let total = pos + seq;
    let mask: Vec<f32> =
        (0..seq).flat_map(|i| (0..total).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 })).collect();
    Tensor::from_vec(mask, (seq, total), device).unwrap()
}

/// Parts of one pass at cached lengths that cross the kernel's tile of 1024 positions, with one, three, two and
/// a hundred new tokens: each part's attention and cache contents match candle's route on its own cache.
#[test]
fn a_pass_over_several_caches_attends_as_candle_does_part_by_part() {
    let device = Device::new_cuda(0).expect("these tests need a CUDA device");
    for (n_head, n_kv, head_dim) in [(14, 2, 64), (12, 2, 128)] {
        let parts = [(0usize, 1usize), (1100, 3), (37, 2), (5, 100)]; // (cached positions, new tokens)
        let rows: usize = parts.iter().map(|p| p.1).sum();
        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut expected = Vec::new();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut part_caches = Vec::new();
        let q = Tensor::from_vec(values(rows * n_head * head_dim, 1), (1, rows, n_head, head_dim), &device).unwrap();
        let k = Tensor::from_vec(values(rows * n_kv * head_dim, 2), (1, rows, n_kv, head_dim), &device).unwrap();
        let v = Tensor::from_vec(values(rows * n_kv * head_dim, 3), (1, rows, n_kv, head_dim), &device).unwrap();
        let mut row = 0;
        for (index, &(cached, new)) in parts.iter().enumerate() {
            let prefix = |seed| {
                Tensor::from_vec(values(n_kv * cached * head_dim, seed), (1, n_kv, cached, head_dim), &device).unwrap()
            };
            let (mut candle_cache, mut our_cache) = (KvCache::default(), KvCache::default());
            if cached > 0 {
                let (pk, pv) = (prefix(10 + index as u64), prefix(20 + index as u64));
                candle_cache.append(&pk, &pv, 4096).unwrap();
                our_cache.append(&pk, &pv, 4096).unwrap();
            }
            let heads = |t: &Tensor| t.narrow(1, row, new).unwrap().transpose(1, 2).unwrap().contiguous().unwrap();
            let (keys, vals) = candle_cache.append(&heads(&k), &heads(&v), 4096).unwrap();
            let mask = (new > 1).then(|| causal_mask(new, cached, &device));
            expected.push(candle_attention(&heads(&q), &keys, &vals, mask.as_ref(), scale).unwrap());
            let (kb, vb) = our_cache.reserve(cached + new, (n_kv, head_dim), DType::F32, &device, 4096).unwrap();
            part_caches.push(PartCache {
                keys: device_address(&kb).unwrap(),
                values: device_address(&vb).unwrap(),
                capacity: kb.dim(2).unwrap(),
                position: cached,
            });
            theirs.push(candle_cache);
            ours.push(our_cache);
            row += new;
        }
        let part_rows: Vec<usize> = parts.iter().map(|p| p.1).collect();
        let table = PassTable::upload(&device, &[part_caches], &part_rows).unwrap();
        let got = table.attend(0, &q, &k, &v, scale as f32).unwrap();
        let expected = Tensor::cat(&expected, 1).unwrap();
        let error = (got - &expected).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(error < 1e-4, "heads {n_head}/{n_kv}×{head_dim}: max error {error}");
        for ((our_cache, candle_cache), &(cached, new)) in ours.iter_mut().zip(&theirs).zip(&parts) {
            our_cache.advance(new);
            let (a, b) =
                (our_cache.prefix(cached + new).unwrap().unwrap(), candle_cache.prefix(cached + new).unwrap().unwrap());
            let diff = (a.0 - b.0).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
                + (a.1 - b.1).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert_eq!(diff, 0.0, "the caches' contents differ");
        }
    }
}
