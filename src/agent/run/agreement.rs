//! Agreement before an answer: the answer's reading written in free text by the executor is written by the planner
//! model too, and where the two name different values, the planner model chooses between them. Applied by the
//! orchestrator as rule `readings-agree` (`agent::run::orchestrator::readings`).
//!
//! Two readings agree where they name the same values beside the question's own (names, quoted texts and numbers,
//! as `agent::provenance::names_and_quotes` and `agent::numbers` read them), or, naming none, say the same words. Otherwise the planner
//! model is shown the reading's prompt (the question and the results) and both readings, and picks one under a
//! grammar of two letters. Nothing here is keyed on words: values are read off how text writes them, and the
//! choice is the model's.
//!
//! Why: on tasks-apps the 0.5B's readings named the wrong item of a list the result held (the least urgent task for
//! the most urgent), and the joiner copied them; a second reading by the stronger model catches a reading that
//! went wrong where the two part, and costs one model call where they agree.

use crate::agent::model_call::timed_chat_call;
use crate::agent::numbers::{numbers_in, same_value};
use crate::agent::provenance::{names_and_quotes, unsupported_names};
use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::llm::ChatMessage;
use crate::Result;

/// The names and quoted texts `reading` writes that `question` does not.
fn answered_names(reading: &str, question: &str) -> Vec<String> {
    let asked = names_and_quotes(question);
    names_and_quotes(reading).into_iter().filter(|v| !asked.contains(v)).collect()
}

/// The numbers `reading` writes that `question` does not, by value, sorted.
fn answered_numbers(reading: &str, question: &str) -> Vec<String> {
    let asked: Vec<f64> = numbers_in(question).iter().map(|n| n.value).collect();
    let mut numbers: Vec<String> = numbers_in(reading)
        .into_iter()
        .filter(|n| !asked.iter().any(|a| same_value(*a, n.value)))
        .map(|n| format!("{}{}", if n.negative { "-" } else { "" }, n.value))
        .collect();
    numbers.sort();
    numbers.dedup();
    numbers
}

/// Whether two readings of `question` agree: each names only names and quoted texts the other (or the question)
/// holds, they write the same numbers beside the question's, and, where they name no value, the same words (case
/// and punctuation aside).
pub fn agree(first: &str, second: &str, question: &str) -> bool {
    let held_by = |reading: &str, other: &str| {
        unsupported_names(reading, &format!("{other}\n{question}").to_lowercase()).is_empty()
    };
    let numbers = answered_numbers(first, question);
    if numbers != answered_numbers(second, question) || !held_by(first, second) || !held_by(second, first) {
        return false;
    }
    let named_none =
        numbers.is_empty() && answered_names(first, question).is_empty() && answered_names(second, question).is_empty();
    !named_none || words(first) == words(second)
}

/// `text`'s words, lower-cased, punctuation and spacing aside.
fn words(text: &str) -> String {
    let kept: String =
        text.chars().map(|c| if c.is_alphanumeric() { c.to_lowercase().next().unwrap_or(c) } else { ' ' }).collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The system message of the choice.
const CHOOSE_SYSTEM: &str =
    "You check answers against the data they were written from. Reply with the letter of the answer the data supports.";

/// Has `model` choose which of two readings of `prompt` (a question and the results it is asked of) the results
/// support. Returns whether it chose `second`, and what the call cost.
pub fn choose(model: &mut Model, prompt: &str, first: &str, second: &str) -> Result<(bool, ModelUsage)> {
    let user = format!(
        "{prompt}\n\nAnswer A: {first}\nAnswer B: {second}\n\nWhich answer does the data above support? Reply A or B."
    );
    let messages = [ChatMessage::system(CHOOSE_SYSTEM), ChatMessage::user(user)];
    let (letter, usage) = timed_chat_call(model, "planner", &messages, Some(&ConstraintSpec::Regex("A|B".into())), 2)?;
    Ok((letter.trim() == "B", usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_agree_on_the_values_they_name_beside_the_questions() {
        let question = "What's the most urgent thing on my to-do list?";
        assert!(agree("The most urgent is the crown at the Dentist's.", "Call the Dentist about the crown.", question));
        assert!(!agree("Send the quarterly report to Priya.", "Call the Dentist about the crown.", question));
        // A name opening one reading's sentence is still the other's name.
        let leeds = "Who lives in Leeds?";
        assert!(agree(
            "Ben Carter and Dev Patel live there.",
            "The customers in Leeds are Ben Carter and Dev Patel.",
            leeds
        ));
        // Numbers by value; the question's own values do not count.
        assert!(agree("You spent 1,250.50 in April 2025.", "It was 1250.5.", "What did I spend in April 2025?"));
        assert!(!agree("It was 12.", "It was 21.", "How many?"));
        // Naming no value, the words decide.
        assert!(agree("No.", "no", "Is it open?"));
        assert!(!agree("Yes, it is open.", "No, it is closed.", "Is it open?"));
        // A value one reading adds is a difference.
        assert!(!agree("Ben Carter lives there.", "It is Ben Carter and Dev Patel.", leeds));
    }
}
