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
