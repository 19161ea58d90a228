//! The question on screen: which of its questions is being answered, the highlighted choice,
//! the choices picked so far, and an answer being typed; keys move, pick, type and send.

use std::collections::BTreeSet;

use crossterm::event::{KeyCode, KeyEvent};
use taskforce_actors::question::{QuestionInfo, QuestionRequest};

use super::{App, Effect};

/// Where the person is in answering a question request.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Answering {
    /// The request being answered.
    pub request: String,
    /// The question of it on screen.
    pub index: usize,
    /// The highlighted row: a choice, or (past them) "type your own answer".
    pub cursor: usize,
    /// Choices picked for a multiple-choice question.
    pub picked: BTreeSet<usize>,
    /// An answer of one's own being typed.
    pub typing: Option<String>,
    /// The answers of the questions before.
    pub answers: Vec<Vec<String>>,
}

/// The rows a question offers: its choices, then one to type an answer when it takes one.
pub fn rows(question: &QuestionInfo) -> usize {
    question.options.len() + usize::from(question.allows_custom())
}

impl App {
    /// The question shown now: the oldest one asked in the open session's tree (after any
    /// permission ask).
    pub fn question(&self) -> Option<&QuestionRequest> {
        let root = self.root()?;
        self.mirror.questions().iter().find(|q| {
            q.root_session_id.as_str() == root || self.mirror.root_of(q.session_id.as_str()) == root
        })
    }

    /// The answering state of the question shown, fresh when another question came up.
    pub fn answering(&self) -> Answering {
        match (self.question(), &self.answering) {
            (Some(q), a) if a.request == q.id.as_str() => a.clone(),
            (Some(q), _) => Answering {
                request: q.id.to_string(),
                ..Answering::default()
            },
            (None, _) => Answering::default(),
        }
    }

    /// A key while a question is shown; `None` when the key is not the question's.
    pub(super) fn question_key(&mut self, key: &KeyEvent) -> Option<Vec<Effect>> {
        let request = self.question()?.clone();
        let mut state = self.answering();
        let question = request.questions.get(state.index)?.clone();
        if let Some(typed) = &mut state.typing {
            match key.code {
                KeyCode::Char(c) => typed.push(c),
                KeyCode::Backspace => {
                    typed.pop();
                }
                KeyCode::Esc => state.typing = None,
                KeyCode::Enter if !typed.trim().is_empty() => {
                    let answer = vec![typed.trim().to_string()];
                    return Some(self.answered(request, state, answer));
                }
                _ => {}
            }
            self.answering = state;
            return Some(Vec::new());
        }
        let rows = rows(&question);
        let pick = |i: usize, state: &mut Answering| -> Option<Vec<String>> {
            if i >= question.options.len() {
                state.typing = Some(String::new());
                return None;
            }
            if question.is_multiple() {
                if !state.picked.remove(&i) {
                    state.picked.insert(i);
                }
                return None;
            }
            Some(vec![question.options[i].label.clone()])
        };
        let answer = match key.code {
            KeyCode::Up => {
                state.cursor = state
                    .cursor
                    .checked_sub(1)
                    .unwrap_or(rows.saturating_sub(1));
                None
            }
            KeyCode::Down => {
                state.cursor = (state.cursor + 1) % rows.max(1);
                None
            }
            KeyCode::Char(c @ '1'..='9') => {
                let i = usize::from(c as u8 - b'1');
                if i >= rows {
                    return Some(Vec::new());
                }
                state.cursor = i;
                pick(i, &mut state)
            }
            KeyCode::Char(' ') if question.is_multiple() => pick(state.cursor, &mut state),
            KeyCode::Enter if question.is_multiple() && state.cursor < question.options.len() => {
                if state.picked.is_empty() {
                    state.picked.insert(state.cursor);
                }
                Some(
                    state
                        .picked
                        .iter()
                        .filter_map(|&i| question.options.get(i).map(|o| o.label.clone()))
                        .collect(),
                )
            }
            KeyCode::Enter => pick(state.cursor, &mut state),
            KeyCode::Esc => {
                self.answering = Answering::default();
                return Some(vec![Effect::DismissQuestion(request.id.to_string())]);
            }
            _ => {
                self.answering = state;
                return Some(Vec::new());
            }
        };
        match answer {
            Some(answer) => Some(self.answered(request, state, answer)),
            None => {
                self.answering = state;
                Some(Vec::new())
            }
        }
    }

    /// One question answered: the next one comes up, or all the answers go to the server.
    fn answered(
        &mut self,
        request: QuestionRequest,
        mut state: Answering,
        answer: Vec<String>,
    ) -> Vec<Effect> {
        state.answers.push(answer);
        if state.answers.len() < request.questions.len() {
            self.answering = Answering {
                request: state.request,
                index: state.index + 1,
                answers: state.answers,
                ..Answering::default()
            };
            return Vec::new();
        }
        self.answering = Answering::default();
        vec![Effect::AnswerQuestion(
            request.id.to_string(),
            state.answers,
        )]
    }
}
