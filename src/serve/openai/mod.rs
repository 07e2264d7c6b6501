//! The OpenAI APIs: chat completions (`chat`, checked by `request`, constrained by `grammar`, split into text and
//! tool calls by `output` and `partial_call`, listing a request's actions first in `asks`, thinking apart from the
//! answer by `reasoning`), text completions
//! (`completions`, `echo`, `ignore_eos`), the Responses API (`responses`, `responses_output`, `response_store`)
//! and token log-probabilities (`logprobs`), all on the generation slots of `plumbing::engine`.

pub(crate) mod asks;
#[cfg(test)]
mod call_grammar_tests;
pub(crate) mod chat;
pub(crate) mod completions;
pub(crate) mod echo;
pub(crate) mod grammar;
pub(crate) mod ignore_eos;
pub(crate) mod logprobs;
pub(crate) mod output;
pub(crate) mod partial_call;
pub(crate) mod reasoning;
pub(crate) mod request;
pub(crate) mod response_store;
pub(crate) mod responses;
pub(crate) mod responses_output;
