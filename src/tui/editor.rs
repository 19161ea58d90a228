//! The prompt editor: multi-line text with a cursor, pasting, and the history of sent prompts
//! (Up on the first line and Down on the last walk it).

/// The prompt being written.
#[derive(Debug, Default, Clone)]
pub struct Editor {
    lines: Vec<String>,
    /// The cursor's line and character (not byte) column.
    row: usize,
    col: usize,
    history: Vec<String>,
    /// Where in the history Up/Down are (`history.len()` is the draft).
    at: usize,
    draft: Option<String>,
}

impl Editor {
    /// An empty editor with `history` (oldest first).
    pub fn new(history: Vec<String>) -> Editor {
        let at = history.len();
        Editor {
            lines: vec![String::new()],
            history,
            at,
            ..Editor::default()
        }
    }

    /// The text as written.
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// The lines, for drawing.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The cursor's line and character column.
    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.lines.iter().all(String::is_empty)
    }

    /// Replaces the text, cursor at its end.
    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_string).collect();
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].chars().count();
    }

    /// Empties the editor (the history stays).
    pub fn clear(&mut self) {
        self.set_text("");
        self.at = self.history.len();
        self.draft = None;
    }

    /// Takes the text to send: records it in the history and empties the editor.
    pub fn take(&mut self) -> String {
        let text = self.text();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        self.clear();
        text
    }

    fn byte_at(line: &str, col: usize) -> usize {
        line.char_indices().nth(col).map_or(line.len(), |(i, _)| i)
    }

    /// Types one character at the cursor.
    pub fn insert(&mut self, c: char) {
        if c == '\n' {
            self.newline();
            return;
        }
        let line = &mut self.lines[self.row];
        let at = Self::byte_at(line, self.col);
        line.insert(at, c);
        self.col += 1;
    }

    /// Inserts pasted text (newlines kept, `\r\n` and tabs tamed).
    pub fn paste(&mut self, text: &str) {
        for c in text.replace("\r\n", "\n").replace('\r', "\n").chars() {
            match c {
                '\t' => {
                    for _ in 0..4 {
                        self.insert(' ');
                    }
                }
                c if c == '\n' || !c.is_control() => self.insert(c),
                _ => {}
            }
        }
    }

    /// Splits the line at the cursor.
    pub fn newline(&mut self) {
        let line = &mut self.lines[self.row];
        let at = Self::byte_at(line, self.col);
        let rest = line.split_off(at);
        self.row += 1;
        self.col = 0;
        self.lines.insert(self.row, rest);
    }

    /// Deletes the character before the cursor (joining lines at a line's start).
    pub fn backspace(&mut self) {
        if self.col > 0 {
            let line = &mut self.lines[self.row];
            let at = Self::byte_at(line, self.col - 1);
            line.remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
            self.lines[self.row].push_str(&line);
        }
    }

    /// Deletes the character under the cursor (joining the next line at a line's end).
    pub fn delete(&mut self) {
        let len = self.lines[self.row].chars().count();
        if self.col < len {
            let line = &mut self.lines[self.row];
            let at = Self::byte_at(line, self.col);
            line.remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    /// Moves the cursor one character left (to the previous line's end at a line's start).
    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
        }
    }

    /// Moves the cursor one character right.
    pub fn right(&mut self) {
        if self.col < self.lines[self.row].chars().count() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    /// To the start of the line.
    pub fn home(&mut self) {
        self.col = 0;
    }

    /// To the end of the line.
    pub fn end(&mut self) {
        self.col = self.lines[self.row].chars().count();
    }

    /// Up: the line above, or on the first line the previous prompt of the history.
    pub fn up(&mut self) {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
        } else if self.at > 0 {
            if self.at == self.history.len() {
                self.draft = Some(self.text());
            }
            self.at -= 1;
            let text = self.history[self.at].clone();
            self.set_text(&text);
        }
    }

    /// Down: the line below, or on the last line the next prompt of the history (then the
    /// draft).
    pub fn down(&mut self) {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
        } else if self.at < self.history.len() {
            self.at += 1;
            let text = if self.at == self.history.len() {
                self.draft.take().unwrap_or_default()
            } else {
                self.history[self.at].clone()
            };
            self.set_text(&text);
        }
    }

    /// Deletes the word before the cursor.
    pub fn delete_word(&mut self) {
        while self.col > 0 && self.char_before().is_some_and(char::is_whitespace) {
            self.backspace();
        }
        while self.col > 0 && self.char_before().is_some_and(|c| !c.is_whitespace()) {
            self.backspace();
        }
    }

    fn char_before(&self) -> Option<char> {
        self.lines[self.row].chars().nth(self.col.checked_sub(1)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_newlines_and_deleting_edit_the_text_at_the_cursor() {
        let mut e = Editor::new(Vec::new());
        for c in "héllo".chars() {
            e.insert(c);
        }
        e.newline();
        e.paste("wörld\r\nagain");
        assert_eq!(e.text(), "héllo\nwörld\nagain");
        e.home();
        e.backspace();
        assert_eq!(e.text(), "héllo\nwörldagain");
        e.left();
        e.left();
        e.delete();
        assert_eq!(e.text(), "héllo\nwördagain");
        e.end();
        e.delete_word();
        assert_eq!(e.text(), "héllo\n");
        assert_eq!(e.cursor(), (1, 0));
    }

    #[test]
    fn up_and_down_walk_the_history_and_come_back_to_the_draft() {
        let mut e = Editor::new(vec!["first".into(), "second\nlines".into()]);
        e.paste("draft");
        e.up();
        assert_eq!(e.text(), "second\nlines");
        // On a multi-line prompt Up first moves within it.
        e.up();
        assert_eq!(e.cursor().0, 0);
        e.up();
        assert_eq!(e.text(), "first");
        e.up();
        assert_eq!(e.text(), "first");
        e.down();
        assert_eq!(e.text(), "second\nlines");
        e.down();
        e.down();
        assert_eq!(e.text(), "draft");
    }

    #[test]
    fn a_sent_prompt_joins_the_history_once() {
        let mut e = Editor::new(Vec::new());
        e.paste("hi");
        assert_eq!(e.take(), "hi");
        assert!(e.is_empty());
        e.paste("hi");
        e.take();
        e.up();
        assert_eq!(e.text(), "hi");
        e.up();
        assert_eq!(e.text(), "hi", "the same prompt twice is kept once");
    }
}
