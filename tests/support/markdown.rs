//! The fenced code blocks of a Markdown page, for the tests that keep the pages in
//! `docs/` in step with the code (`tests/docs_examples.rs`, `tests/record_format.rs`).
//! Included by path (`#[path = "support/markdown.rs"]`), not through `support/mod.rs`,
//! so that tests without pages don't carry it.

/// One fenced block: its info string (the tag after the opening fence), the 1-based line
/// of the opening fence, and its text.
pub struct Block {
    pub info: String,
    pub line: usize,
    pub text: String,
}

/// Every block fenced by three backticks at the start of a line, in order. A fence left
/// open is an error (a page whose last example swallowed the rest).
pub fn fenced_blocks(page: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in page.lines().enumerate() {
        match (open.as_mut(), line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_string(),
                    line: index + 1,
                    text: String::new(),
                })
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => blocks.extend(open.take()),
            (Some(block), _) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, None) => {}
        }
    }
    match open {
        Some(block) => Err(format!(
            "the block opened at line {} is never closed",
            block.line
        )),
        None => Ok(blocks),
    }
}
