//! HTML pages as markdown (htmd, which follows Turndown, the converter OpenCode uses) or as
//! plain text.
//!
//! Plain text comes from html5ever's tokenizer alone, in one pass. Building a document tree
//! costs time in proportion to the nesting depth for every element (the parser searches the
//! open elements), and the markdown converter recurses through the tree; so a page nested
//! deeper than [`MAX_PARSE_DEPTH`] (judged by the tokenizer first) is returned as text, and in
//! a tree that is built, elements deeper than [`MAX_DEPTH`] are replaced by their text.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use htmd::options::{BulletListMarker, CodeBlockStyle, HeadingStyle, HrStyle, Options};
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use markup5ever_rcdom::{Node, NodeData};

/// Pages nested deeper than this are returned as text rather than markdown.
const MAX_PARSE_DEPTH: usize = 512;

/// Elements nested deeper than this are flattened into their text before conversion.
const MAX_DEPTH: usize = 128;

/// Elements whose content is never shown.
const SKIPPED: &[&str] = &[
    "script", "style", "meta", "link", "noscript", "iframe", "object", "embed", "template",
];

/// Elements whose content the tokenizer reads as raw text, and how.
fn raw_kind(name: &str) -> Option<RawKind> {
    match name {
        "script" => Some(RawKind::ScriptData),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => Some(RawKind::Rawtext),
        "title" | "textarea" => Some(RawKind::Rcdata),
        _ => None,
    }
}

/// Elements that have no content (no end tag).
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Elements whose end tag may be left out (the parser closes them itself).
const OPTIONAL_END: &[&str] = &[
    "body", "caption", "colgroup", "dd", "dt", "head", "html", "li", "optgroup", "option", "p",
    "rp", "rt", "tbody", "td", "tfoot", "th", "thead", "tr",
];

/// Elements that start and end a line in plain text.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "title",
    "tr",
    "ul",
];

/// `html` as markdown: ATX headings, `-` bullets, `---` rules, fenced code (OpenCode's
/// Turndown settings), without scripts, styles and other invisible content.
pub(crate) fn to_markdown(html: &str) -> String {
    if read(html).max_depth.get() > MAX_PARSE_DEPTH {
        return to_text(html);
    }
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .options(Options {
            heading_style: HeadingStyle::Atx,
            hr_style: HrStyle::Dashes,
            bullet_list_marker: BulletListMarker::Dash,
            code_block_style: CodeBlockStyle::Fenced,
            ..Options::default()
        })
        .build();
    match converter.html_to_tree(html) {
        Ok(tree) => {
            flatten_deep(&tree);
            converter.tree_to_markdown(&tree)
        }
        // Parsing a string does not fail; were it to, the page's text is still worth reading.
        Err(_) => to_text(html),
    }
}

/// The visible text of `html`: text in order, a line break around each block element, runs
/// of blank space shortened.
pub(crate) fn to_text(html: &str) -> String {
    tidy(&read(html).text.borrow())
}

/// What one tokenizer pass over a page finds.
#[derive(Default)]
struct Reader {
    /// The visible text, with a line break at each block element's start and end.
    text: RefCell<String>,
    /// Inside raw text (a script, a style, a title): whether that text is shown.
    raw: Cell<Option<bool>>,
    /// How many skipped elements (`template`, `object`) are open.
    skipping: Cell<usize>,
    /// Open elements, and the most at once (elements whose end tag may be left out are not
    /// counted).
    depth: Cell<usize>,
    max_depth: Cell<usize>,
}

impl Reader {
    fn tag(&self, tag: &Tag) -> TokenSinkResult<()> {
        let name: &str = &tag.name;
        let start = tag.kind == TagKind::StartTag;
        if BLOCKS.contains(&name) {
            self.text.borrow_mut().push('\n');
        }
        if start && let Some(kind) = raw_kind(name) {
            self.raw.set(Some(!SKIPPED.contains(&name)));
            return TokenSinkResult::RawData(kind);
        }
        if raw_kind(name).is_some() {
            self.raw.set(None);
            return TokenSinkResult::Continue;
        }
        if SKIPPED.contains(&name) && !VOID.contains(&name) {
            let open = self.skipping.get();
            self.skipping.set(if start {
                open + 1
            } else {
                open.saturating_sub(1)
            });
        }
        if !VOID.contains(&name) && !OPTIONAL_END.contains(&name) && !tag.self_closing {
            let depth = self.depth.get();
            let depth = if start {
                depth + 1
            } else {
                depth.saturating_sub(1)
            };
            self.depth.set(depth);
            self.max_depth.set(self.max_depth.get().max(depth));
        }
        TokenSinkResult::Continue
    }
}

impl TokenSink for Reader {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            Token::TagToken(tag) => return self.tag(&tag),
            Token::CharacterTokens(text) => {
                let shown = match self.raw.get() {
                    Some(shown) => shown,
                    None => self.skipping.get() == 0,
                };
                if shown {
                    self.text.borrow_mut().push_str(&text);
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// One tokenizer pass over `html`.
fn read(html: &str) -> Reader {
    let tokenizer = Tokenizer::new(Reader::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from(html));
    // The sink never asks to run a script, so one feed reads everything.
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink
}

/// Text with spaces and tabs inside each line collapsed, lines trimmed, and at most one blank
/// line in a row.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(&words.join(" "));
    }
    out
}

/// The text below `root` (not of skipped elements), gathered without recursion.
fn text_below(root: &Rc<Node>) -> String {
    let mut out = String::new();
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        match &node.data {
            NodeData::Text { contents } => out.push_str(&contents.borrow()),
            NodeData::Element { name, .. } if SKIPPED.contains(&&*name.local) => {}
            _ => stack.extend(node.children.borrow().iter().rev().cloned()),
        }
    }
    out
}

/// Replaces the content of every element at depth [`MAX_DEPTH`] with its text.
fn flatten_deep(root: &Rc<Node>) {
    let mut stack: Vec<(Rc<Node>, usize)> = vec![(root.clone(), 0)];
    while let Some((node, depth)) = stack.pop() {
        if depth >= MAX_DEPTH && !node.children.borrow().is_empty() {
            let leaf = Node::new(NodeData::Text {
                contents: RefCell::new(StrTendril::from(text_below(&node))),
            });
            leaf.parent.set(Some(Rc::downgrade(&node)));
            // The old subtree drops here, node by node (rcdom's drop does not recurse).
            *node.children.borrow_mut() = vec![leaf];
            continue;
        }
        for child in node.children.borrow().iter() {
            stack.push((child.clone(), depth + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<html><head><title>T &amp; C</title><style>body{color:red}</style>
        <script>if (a<b) { var secret = "</p>"; }</script></head><body><h1>Hello</h1>
        <p>Some <b>bold</b> and <a href="https://e.com/x">a link</a>.</p>
        <ul><li>one</li><li>two</li></ul><pre><code>let x = 1;</code></pre>
        <noscript>enable js</noscript><template><p>hidden</p></template></body></html>"#;

    #[test]
    fn html_becomes_markdown_without_scripts_or_styles() {
        let md = to_markdown(PAGE);
        assert!(md.contains("# Hello"), "{md}");
        assert!(
            md.contains("Some **bold** and [a link](https://e.com/x)."),
            "{md}"
        );
        assert!(md.contains("-   one"), "{md}");
        assert!(md.contains("```\nlet x = 1;\n```"), "{md}");
        for hidden in ["secret", "color:red", "enable js", "hidden"] {
            assert!(!md.contains(hidden), "{hidden} in {md}");
        }
    }

    #[test]
    fn html_becomes_text_with_blocks_on_their_own_lines() {
        assert_eq!(
            to_text(PAGE),
            "T & C\n\nHello\n\nSome bold and a link.\n\none\n\ntwo\n\nlet x = 1;"
        );
    }

    #[test]
    fn sloppy_pages_are_not_taken_for_deep_ones() {
        let html = format!("<ul>{}</ul>", "<li><p>item".repeat(2000));
        assert!(read(&html).max_depth.get() < 5);
        assert!(to_markdown(&html).contains("item"));
    }

    #[test]
    fn deep_pages_convert_on_a_small_stack_and_very_deep_ones_as_text() {
        let page = |n: usize| {
            format!(
                "<p>top</p>{}<em>deep</em> words{}",
                "<div>".repeat(n),
                "</div>".repeat(n)
            )
        };
        let (flattened, very_deep) = (page(400), page(50_000));
        // On a thread with a small stack, as a blocking task has.
        let converted = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                (
                    to_markdown(&flattened),
                    to_markdown(&very_deep),
                    to_text(&very_deep),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(converted.0, "top\n\ndeep words");
        assert_eq!(converted.1, "top\n\ndeep words");
        assert_eq!(converted.2, "top\n\ndeep words");
    }
}
