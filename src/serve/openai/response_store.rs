//! Stored responses for the Responses API's `previous_response_id`: each answered response's whole conversation
//! (as chat messages: its inputs, and its output items), kept in this process's memory only, bounded in count and
//! age. `store: false` keeps nothing; nothing is ever written to disk.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Most responses kept; the oldest goes first.
pub const MAX_STORED: usize = 256;

/// How long a stored response can be continued.
pub const MAX_AGE: Duration = Duration::from_secs(60 * 60);

/// Most chat messages one stored conversation holds (a longer one is refused when stored: the client sends the
/// conversation itself).
pub const MAX_MESSAGES: usize = 512;

/// One conversation, up to and including a response's output.
#[derive(Debug, Clone)]
struct Stored {
    messages: Vec<Value>,
    at: Instant,
}

/// The store: responses by id, in the order they were stored.
#[derive(Debug, Default)]
pub struct ResponseStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, Stored>,
    order: VecDeque<String>,
}

impl ResponseStore {
    /// Keeps response `id`'s conversation (its chat messages, system messages left out: a continuation brings its
    /// own instructions, as OpenAI's does); the oldest and the expired go.
    pub fn keep(&self, id: &str, messages: Vec<Value>) {
        let messages: Vec<Value> = messages.into_iter().filter(|m| m["role"] != "system").collect();
        if messages.len() > MAX_MESSAGES {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.expire(Instant::now());
        while inner.order.len() >= MAX_STORED {
            if let Some(oldest) = inner.order.pop_front() {
                inner.by_id.remove(&oldest);
            }
        }
        inner.order.push_back(id.to_string());
        inner.by_id.insert(id.to_string(), Stored { messages, at: Instant::now() });
    }

    /// The conversation through response `id`, if it is still kept.
    pub fn conversation(&self, id: &str) -> Option<Vec<Value>> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.expire(Instant::now());
        inner.by_id.get(id).map(|stored| stored.messages.clone())
    }
}

impl Inner {
    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            let old = self.by_id.get(oldest).is_none_or(|s| now.duration_since(s.at) > MAX_AGE);
            if !old {
                break;
            }
            let id = self.order.pop_front().expect("checked");
            self.by_id.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_conversations_without_their_instructions_and_drops_the_oldest_first() {
        let store = ResponseStore::default();
        store.keep(
            "resp_a",
            vec![
                json!({"role": "system", "content": "be brief"}),
                json!({"role": "user", "content": "hi"}),
                json!({"role": "assistant", "content": "hello"}),
            ],
        );
        let kept = store.conversation("resp_a").unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0]["role"], "user");
        assert!(store.conversation("resp_b").is_none());
        for i in 0..MAX_STORED {
            store.keep(&format!("resp_{i}"), vec![json!({"role": "user", "content": "x"})]);
        }
        assert!(store.conversation("resp_a").is_none(), "the oldest went first");
        assert!(store.conversation(&format!("resp_{}", MAX_STORED - 1)).is_some());
        let long = vec![json!({"role": "user", "content": "x"}); MAX_MESSAGES + 1];
        store.keep("resp_long", long);
        assert!(store.conversation("resp_long").is_none(), "an over-long conversation is not kept");
    }
}
