//! The compiled grammars a [`super::GrammarEngine`] keeps: bounded, least recently used first out, and shared fairly
//! between the callers that own them (the agent's own grammars, each server client).
//!
//! A full cache gives up one grammar per new one, never all of them: a caller that holds its share
//! ([`OWNER_SHARE`]) gives up its own least recently used grammar; anyone else takes the place of the least recently
//! used grammar of an owner past its share, else of the cache's least recently used.
//! So a client that cycles through schemas churns its own share, and the grammars others use stay compiled. (It
//! used to clear itself when full: one such client made every other client compile again.)

use std::collections::HashMap;

/// Grammars kept per engine: bounded so a long-lived process cannot grow it forever.
pub const CAPACITY: usize = 64;

/// Grammars one owner keeps once the cache is full: past it, its new grammars replace its own.
pub const OWNER_SHARE: usize = CAPACITY / 4;

/// One cached grammar: the compiled value, who asked for it first, when it was last used.
struct Entry<T> {
    value: T,
    owner: Option<String>,
    used: u64,
}

/// The cache, keyed by the grammar's spec.
pub struct GrammarCache<T> {
    entries: HashMap<String, Entry<T>>,
    clock: u64,
}

impl<T: Clone> Default for GrammarCache<T> {
    fn default() -> Self {
        Self { entries: HashMap::new(), clock: 0 }
    }
}

impl<T: Clone> GrammarCache<T> {
    /// The grammar cached under `key`, marked as used now.
    pub fn get(&mut self, key: &str) -> Option<T> {
        self.clock += 1;
        let entry = self.entries.get_mut(key)?;
        entry.used = self.clock;
        Some(entry.value.clone())
    }

    /// Keeps `value` under `key` for `owner` (`None`: the process's own), giving up one grammar where the cache is
    /// full: the owner's least recently used where it holds its share, else that of an owner past its share, else
    /// the cache's.
    pub fn insert(&mut self, key: String, value: T, owner: Option<&str>) {
        self.clock += 1;
        if !self.entries.contains_key(&key) && self.entries.len() >= CAPACITY {
            if let Some(victim) = self.victim(owner) {
                self.entries.remove(&victim);
            }
        }
        self.entries.insert(key, Entry { value, owner: owner.map(str::to_string), used: self.clock });
    }

    /// The grammar a full cache gives up for `owner`'s new one: the owner's least recently used where it holds its
    /// share; else the least recently used of an owner past its share; else the cache's.
    fn victim(&self, owner: Option<&str>) -> Option<String> {
        let mut held: HashMap<Option<&str>, usize> = HashMap::new();
        for entry in self.entries.values() {
            *held.entry(entry.owner.as_deref()).or_default() += 1;
        }
        let holds = |o: Option<&str>| held.get(&o).copied().unwrap_or(0);
        let (own_share_full, anyone_past_share) =
            (holds(owner) >= OWNER_SHARE, held.values().any(|n| *n > OWNER_SHARE));
        let candidate = |e: &Entry<T>| {
            if own_share_full {
                e.owner.as_deref() == owner
            } else if anyone_past_share {
                holds(e.owner.as_deref()) > OWNER_SHARE
            } else {
                true
            }
        };
        self.entries.iter().filter(|(_, e)| candidate(e)).min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
    }

    /// Forgets every grammar.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Grammars kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether `key` is kept (without marking it used).
    #[cfg(test)]
    fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full cache gives up its least recently used grammar, not all of them.
    #[test]
    fn a_full_cache_gives_up_its_least_recently_used_grammar() {
        let mut cache = GrammarCache::default();
        for i in 0..CAPACITY {
            cache.insert(format!("g{i}"), i, Some(&format!("client{}", i % 8)));
        }
        assert_eq!(cache.get("g0"), Some(0), "g0 is used again: g1 is now the oldest");
        cache.insert("new".into(), 99, Some("client9"));
        assert_eq!(cache.len(), CAPACITY);
        assert!(cache.contains("g0") && !cache.contains("g1") && cache.contains("new"));
    }

    /// A client cycling through schemas replaces its own grammars once it holds its share; the ones other callers
    /// use stay.
    #[test]
    fn a_client_cycling_through_schemas_churns_only_its_own_share() {
        let mut cache = GrammarCache::default();
        cache.insert("plan".into(), 0, None);
        cache.insert("tools-a".into(), 1, Some("alice"));
        for i in 0..1000 {
            cache.insert(format!("cycle{i}"), i, Some("mallory"));
        }
        assert!(cache.contains("plan") && cache.contains("tools-a"), "others' grammars stay");
        assert_eq!(cache.len(), CAPACITY);
        let mallory = (0..1000).filter(|i| cache.contains(&format!("cycle{i}"))).count();
        assert_eq!(mallory, CAPACITY - 2, "below the share, the cycler took the free room; above it, only its own");
        assert!(cache.contains("cycle999") && !cache.contains("cycle0"), "its newest kept, its oldest given up");
        // Another owner's new grammar, in a full cache, takes the cycler's oldest, not the others'.
        cache.insert("tools-b".into(), 2, Some("bob"));
        assert!(cache.contains("plan") && cache.contains("tools-a") && cache.contains("tools-b"));
    }
}
