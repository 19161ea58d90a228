//! Questions waiting for the user: asked by the `question` tool, listed for clients, answered
//! or dismissed by them. A question from a subagent at any depth says where it comes from
//! (`rootSessionID` and the agents' `path`), so that a client of the root can answer it.

pub use taskforce_agents::question::{
    QuestionAnswer, QuestionError, QuestionInfo, QuestionOption, QuestionRequest,
};

use std::sync::{Mutex, MutexGuard, PoisonError};

use indexmap::IndexMap;
use taskforce_agents::id::{QuestionId, SessionId};
use taskforce_agents::permission::{AskOrigin, ToolRef};
use tokio::sync::oneshot;

use crate::bus::{BusHandle, Event};

struct Pending {
    request: QuestionRequest,
    done: oneshot::Sender<Result<Vec<QuestionAnswer>, QuestionError>>,
}

/// The questions of one runtime waiting for answers.
pub struct QuestionBroker {
    bus: BusHandle,
    pending: Mutex<IndexMap<QuestionId, Pending>>,
}

impl QuestionBroker {
    /// A broker publishing on `bus`.
    pub fn new(bus: BusHandle) -> Self {
        QuestionBroker {
            bus,
            pending: Mutex::default(),
        }
    }

    /// Publishes `question.asked` and waits for the answers (one per question, in order), or
    /// the question's dismissal.
    pub async fn ask(
        &self,
        origin: AskOrigin,
        tool: Option<ToolRef>,
        questions: Vec<QuestionInfo>,
    ) -> Result<Vec<QuestionAnswer>, QuestionError> {
        let (done, wait) = oneshot::channel();
        let request = QuestionRequest {
            id: QuestionId::new(),
            session_id: origin.session_id,
            questions,
            tool,
            root_session_id: origin.root_session_id,
            path: origin.path,
        };
        self.lock().insert(
            request.id.clone(),
            Pending {
                request: request.clone(),
                done,
            },
        );
        // Whoever stops waiting takes the question back.
        let guard = Withdraw {
            broker: self,
            id: request.id.clone(),
        };
        self.bus.publish(Event::QuestionAsked(Box::new(request)));
        let answer = wait.await.unwrap_or(Err(QuestionError::Rejected));
        drop(guard);
        answer
    }

    /// Answers a pending question; false when none has this id. Missing answers count as
    /// unanswered; extra ones are an error.
    pub fn reply(
        &self,
        id: &QuestionId,
        answers: Vec<QuestionAnswer>,
    ) -> Result<bool, QuestionReplyError> {
        let mut pending = self.lock();
        let Some(entry) = pending.get(id) else {
            return Ok(false);
        };
        let asked = entry.request.questions.len();
        if answers.len() > asked {
            return Err(QuestionReplyError::TooManyAnswers {
                asked,
                given: answers.len(),
            });
        }
        for (i, (answer, question)) in answers.iter().zip(&entry.request.questions).enumerate() {
            if answer.len() > 1 && !question.is_multiple() {
                return Err(QuestionReplyError::OneAnswerOnly { question: i });
            }
        }
        let Some(entry) = pending.shift_remove(id) else {
            return Ok(false);
        };
        drop(pending);
        self.bus.publish(Event::QuestionReplied {
            session_id: entry.request.session_id.clone(),
            request_id: entry.request.id.clone(),
            answers: answers.clone(),
        });
        let _ = entry.done.send(Ok(answers));
        Ok(true)
    }

    /// Dismisses a pending question; false when none has this id.
    pub fn reject(&self, id: &QuestionId) -> bool {
        let Some(entry) = self.lock().shift_remove(id) else {
            return false;
        };
        self.rejected(entry);
        true
    }

    /// Every pending question, oldest first.
    pub fn list(&self) -> Vec<QuestionRequest> {
        self.lock().values().map(|p| p.request.clone()).collect()
    }

    /// Dismisses every pending question of `session` (its loop was cancelled).
    pub fn drop_session(&self, session: &SessionId) {
        let mut pending = self.lock();
        let ids: Vec<QuestionId> = pending
            .iter()
            .filter(|(_, p)| &p.request.session_id == session)
            .map(|(id, _)| id.clone())
            .collect();
        let gone: Vec<Pending> = ids
            .iter()
            .filter_map(|id| pending.shift_remove(id))
            .collect();
        drop(pending);
        gone.into_iter().for_each(|p| self.rejected(p));
    }

    fn rejected(&self, entry: Pending) {
        self.bus.publish(Event::QuestionRejected {
            session_id: entry.request.session_id.clone(),
            request_id: entry.request.id.clone(),
        });
        let _ = entry.done.send(Err(QuestionError::Rejected));
    }

    fn lock(&self) -> MutexGuard<'_, IndexMap<QuestionId, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Takes a question back when its asker stops waiting (its call was cancelled).
struct Withdraw<'a> {
    broker: &'a QuestionBroker,
    id: QuestionId,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.broker.reject(&self.id);
    }
}

/// Why answers were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QuestionReplyError {
    /// More answers than questions.
    #[error("{given} answers for {asked} question(s)")]
    TooManyAnswers {
        /// How many questions were asked.
        asked: usize,
        /// How many answers came.
        given: usize,
    },
    /// Several choices for a question that takes one.
    #[error("answers[{question}]: the question takes one answer, not several")]
    OneAnswerOnly {
        /// The question's position.
        question: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::{BusItem, Filter};
    use futures::StreamExt;

    fn origin(session: &SessionId) -> AskOrigin {
        AskOrigin::root(session.clone(), "build")
    }

    fn info(multiple: bool) -> QuestionInfo {
        QuestionInfo {
            question: "Which?".into(),
            header: "Pick".into(),
            options: vec![
                QuestionOption {
                    label: "A".into(),
                    description: "a".into(),
                },
                QuestionOption {
                    label: "B".into(),
                    description: "b".into(),
                },
            ],
            multiple: Some(multiple),
            custom: None,
        }
    }

    #[tokio::test]
    async fn a_question_waits_for_its_answers_and_refuses_malformed_ones() {
        let bus = BusHandle::start(64);
        let broker = std::sync::Arc::new(QuestionBroker::new(bus.clone()));
        let mut events = bus.subscribe(Filter::All);
        let session = SessionId::new();
        let asking = {
            let (broker, session) = (broker.clone(), session.clone());
            tokio::spawn(async move {
                broker
                    .ask(origin(&session), None, vec![info(false), info(true)])
                    .await
            })
        };
        let Some(BusItem::Event(asked)) = events.next().await else {
            panic!("an event")
        };
        let Event::QuestionAsked(request) = &asked.event else {
            panic!("question.asked first, got {:?}", asked.event)
        };
        assert_eq!(broker.list().len(), 1);
        let id = request.id.clone();
        assert_eq!(
            broker.reply(&id, vec![vec!["A".into(), "B".into()]]),
            Err(QuestionReplyError::OneAnswerOnly { question: 0 })
        );
        assert!(matches!(
            broker.reply(&id, vec![vec![], vec![], vec![]]),
            Err(QuestionReplyError::TooManyAnswers { .. })
        ));
        assert_eq!(broker.reply(&id, vec![vec!["A".into()]]), Ok(true));
        assert_eq!(
            asking.await.unwrap(),
            Ok(vec![vec!["A".to_string()]]),
            "missing answers are left out, to read as unanswered"
        );
        assert!(broker.list().is_empty());
        assert_eq!(broker.reply(&id, vec![]), Ok(false), "answered once only");
    }

    #[tokio::test]
    async fn a_dismissed_or_abandoned_question_is_rejected_and_gone() {
        let bus = BusHandle::start(64);
        let broker = std::sync::Arc::new(QuestionBroker::new(bus.clone()));
        let session = SessionId::new();
        let asking = {
            let (broker, session) = (broker.clone(), session.clone());
            tokio::spawn(async move { broker.ask(origin(&session), None, vec![info(false)]).await })
        };
        while broker.list().is_empty() {
            tokio::task::yield_now().await;
        }
        broker.drop_session(&session);
        assert_eq!(asking.await.unwrap(), Err(QuestionError::Rejected));

        // An asker that stops waiting takes its question back.
        let asking = {
            let (broker, session) = (broker.clone(), session.clone());
            tokio::spawn(async move { broker.ask(origin(&session), None, vec![info(false)]).await })
        };
        while broker.list().is_empty() {
            tokio::task::yield_now().await;
        }
        asking.abort();
        let _ = asking.await;
        assert!(broker.list().is_empty());
    }
}
