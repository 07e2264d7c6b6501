//! How well tool retrieval finds a sample's gold tools: recall@K over NESTFUL catalogues, no model involved.

use serde::Serialize;

use super::{distractor_catalogue, BenchDataError, Distractors, NestfulSample, NestfulTool};
use crate::tools::retrieval::ToolIndex;
use crate::tools::ToolSpec;

/// Retrieval's gold-tool recall at one K.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecallAtK {
    /// How many tools retrieval keeps.
    pub k: usize,
    /// Mean over samples of the share of the sample's gold tools among the K kept.
    pub recall: f64,
    /// Share of samples whose gold tools are all among the K kept (the plan can be right only then).
    pub all_gold: f64,
    /// Mean catalogue size the K were chosen from.
    pub catalogue: f64,
}

/// Recall@K of retrieval (the goal against each sample's catalogue, as `bench nestful --tools-top-k` picks) for
/// each K; samples without gold tools are left out.
pub fn retrieval_recall(
    samples: &[NestfulSample],
    tools: &[NestfulTool],
    distractors: Distractors,
    seed: u64,
    ks: &[usize],
) -> Result<Vec<RecallAtK>, BenchDataError> {
    let mut sums = vec![(0.0, 0usize); ks.len()];
    let mut counted = 0usize;
    let mut catalogue_sizes = 0usize;
    for sample in samples {
        let gold = sample.gold_tools();
        if gold.is_empty() {
            continue;
        }
        let catalogue = distractor_catalogue(sample, tools, distractors, seed)?;
        let specs: Vec<ToolSpec> = catalogue.iter().map(NestfulTool::tool_spec).collect();
        let index = ToolIndex::new(&specs);
        counted += 1;
        catalogue_sizes += specs.len();
        for (sum, &k) in sums.iter_mut().zip(ks) {
            let kept = index.top(&sample.input, k);
            let found = gold.iter().filter(|g| kept.iter().any(|name| name == *g)).count();
            sum.0 += found as f64 / gold.len() as f64;
            sum.1 += usize::from(found == gold.len());
        }
    }
    let n = counted.max(1) as f64;
    Ok(ks
        .iter()
        .zip(sums)
        .map(|(&k, (recall, all))| RecallAtK {
            k,
            recall: recall / n,
            all_gold: all as f64 / n,
            catalogue: catalogue_sizes as f64 / n,
        })
        .collect())
}
