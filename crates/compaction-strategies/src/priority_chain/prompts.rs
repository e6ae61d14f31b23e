//! P3's prompts, beside their Markdown files.

use compaction::{Prompt, Transcript};

/// P3's prompt in paper mode (`priority_chain/paper_mid_stage.md`, beside this module): a
/// mid-stage summary of `stage`, the span written as `llmSummarize` writes it
/// ([`Transcript::Brackets`]).
pub fn paper_mid_stage_prompt(stage: &str) -> Prompt {
    Prompt { transcript: Transcript::Brackets, ..Prompt::new("paper_mid_stage", include_str!("paper_mid_stage.md")) }
        .with_var("stage", stage)
        .with_heading(format!("## Summary of stage {stage} (round {{round}})"))
}

/// P3's prompt in general chat (`priority_chain/general_chat.md`): a short bullet summary.
pub fn general_chat_prompt() -> Prompt {
    Prompt { transcript: Transcript::Brackets, ..Prompt::new("general_chat", include_str!("general_chat.md")) }
}

/// Every prompt this strategy asks for.
pub fn prompts() -> Vec<Prompt> {
    vec![paper_mid_stage_prompt(""), general_chat_prompt()]
}
