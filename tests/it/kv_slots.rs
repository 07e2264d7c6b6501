//! The KV cache slots: a model serving several prompt families keeps each warm, and a new family takes the
//! least recently used slot.

use tandem::llm::kv_cache::CacheSlots;

fn family(id: u32, len: u32) -> Vec<u32> {
    (0..len).map(|i| id * 10_000 + i).collect()
}

/// Selects a slot for `prompt` and records it as the slot's content (as a forward pass would).
fn serve(slots: &mut CacheSlots, prompt: &[u32]) -> usize {
    slots.select_for(prompt);
    let shared = slots.active().tokens.iter().zip(prompt).take_while(|(a, b)| a == b).count();
    slots.active_mut().tokens = prompt.to_vec();
    shared
}

#[test]
fn alternating_families_each_keep_their_slot() {
    let mut slots = CacheSlots::new(3, 2);
    let (planner, executor) = (family(1, 100), family(2, 100));
    assert_eq!(serve(&mut slots, &planner), 0);
    assert_eq!(serve(&mut slots, &executor), 0, "a new family does not take the planner's slot");
    let mut planner_again = planner[..80].to_vec();
    planner_again.extend([7, 8, 9]);
    assert_eq!(serve(&mut slots, &planner_again), 80, "the planner's prefix survived the executor's call");
    assert_eq!(serve(&mut slots, &executor), 100);
}

#[test]
fn a_fourth_family_replaces_the_least_recently_used() {
    let mut slots = CacheSlots::new(3, 2);
    let families: Vec<Vec<u32>> = (1..=4).map(|f| family(f, 50)).collect();
    for f in &families[..3] {
        serve(&mut slots, f);
    }
    serve(&mut slots, &families[0]); // family 1 used again: family 2 is now the least recently used
    assert_eq!(serve(&mut slots, &families[3]), 0);
    assert_eq!(serve(&mut slots, &families[0]), 50, "recently used family kept");
    assert_eq!(serve(&mut slots, &families[2]), 50, "family 3 kept");
    assert_eq!(serve(&mut slots, &families[1]), 0, "family 2 was replaced");
}

#[test]
fn a_short_shared_opening_does_not_claim_a_warm_slot() {
    let mut slots = CacheSlots::new(2, 2);
    let first = family(1, 100);
    serve(&mut slots, &first);
    // Shares only 10 tokens (a chat template's opening, say): it must not overwrite the first family.
    let mut other = first[..10].to_vec();
    other.extend(family(3, 90));
    assert_eq!(serve(&mut slots, &other), 0, "served by the empty slot");
    assert_eq!(serve(&mut slots, &first), 100);
    slots.clear_all();
    assert_eq!(serve(&mut slots, &first), 0, "clear_all forgets every slot");
}

/// A writer that fills positions itself (the GPU's pass attention) reserves room, writes into the buffers and
/// advances: growing keeps what was cached, and the cache then reads as if the rows had been appended.
#[test]
fn reserved_rows_written_in_place_read_as_appended_rows() {
    use candle_core::{DType, Device, Tensor};
    use tandem::llm::kv_cache::KvCache;
    let device = Device::Cpu;
    let rows = |start: usize, n: usize| {
        let values: Vec<f32> = (0..2 * n * 4).map(|i| (start * 100 + i) as f32).collect();
        Tensor::from_vec(values, (1, 2, n, 4), &device).unwrap()
    };
    let (mut appended, mut written) = (KvCache::default(), KvCache::default());
    appended.append(&rows(0, 3), &rows(1, 3), 4096).unwrap();
    written.append(&rows(0, 3), &rows(1, 3), 4096).unwrap();
    // 600 more positions: past the first buffer's 512, so the buffers grow and must keep the first three.
    appended.append(&rows(2, 600), &rows(3, 600), 4096).unwrap();
    let (keys, values) = written.reserve(603, (2, 4), DType::F32, &device, 4096).unwrap();
    assert!(keys.dim(2).unwrap() >= 603);
    keys.slice_set(&rows(2, 600), 2, 3).unwrap();
    values.slice_set(&rows(3, 600), 2, 3).unwrap();
    assert_eq!(written.len(), 3, "reserving counts nothing as cached");
    written.advance(600);
    let (a, b) = (appended.prefix(603).unwrap().unwrap(), written.prefix(603).unwrap().unwrap());
    assert_eq!(
        a.0.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        b.0.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    );
    assert_eq!(
        a.1.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        b.1.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    );
}
