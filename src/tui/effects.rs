//! Running what the TUI asks of the server, each in a task of its own so that the screen never
//! waits, and taking the answers back into the TUI's state.

use taskforce_actors::PromptInput;
use taskforce_actors::store::MessageWithParts;
use taskforce_agents::model::{Message, Session};
use tokio::sync::mpsc;

use super::app::{App, Effect};
use crate::client::{Client, ClientError};

/// An answer from the server.
#[derive(Debug)]
pub enum Done {
    /// A session was created for the first prompt: open it.
    Created(Box<Session>),
    /// A session, its messages and its children.
    Loaded(Box<Session>, Vec<MessageWithParts>, Vec<Session>),
    /// Every session of the project.
    Sessions(Vec<Session>),
    /// Files matching the query of an `@` completion.
    Files(String, Vec<String>),
    /// Something failed: shown in the footer.
    Failed(String),
}

/// The tasks running effects, and their answers.
pub struct Effects {
    client: Client,
    sender: mpsc::UnboundedSender<Done>,
    receiver: mpsc::UnboundedReceiver<Done>,
}

impl Effects {
    /// Effects against `client`'s server.
    pub fn new(client: Client) -> Effects {
        let (sender, receiver) = mpsc::unbounded_channel();
        Effects {
            client,
            sender,
            receiver,
        }
    }

    /// The next answer.
    pub async fn next(&mut self) -> Option<Done> {
        self.receiver.recv().await
    }

    /// Starts `effect`.
    pub fn run(&self, effect: Effect) {
        let client = self.client.clone();
        let sender = self.sender.clone();
        tokio::spawn(async move {
            let done = match perform(&client, effect, &sender).await {
                Ok(Some(done)) => done,
                Ok(None) => return,
                Err(e) => Done::Failed(e.to_string()),
            };
            let _ = sender.send(done);
        });
    }
}

/// The session to prompt: `session`, or a new one (opened at once).
async fn session_for(
    client: &Client,
    session: Option<String>,
    sender: &mpsc::UnboundedSender<Done>,
) -> Result<String, ClientError> {
    if let Some(id) = session {
        return Ok(id);
    }
    let created = client.create_session(None).await?;
    let id = created.id.to_string();
    let _ = sender.send(Done::Created(Box::new(created)));
    Ok(id)
}

async fn perform(
    client: &Client,
    effect: Effect,
    sender: &mpsc::UnboundedSender<Done>,
) -> Result<Option<Done>, ClientError> {
    match effect {
        Effect::Prompt {
            session,
            text,
            agent,
        } => {
            let id = session_for(client, session, sender).await?;
            let mut prompt = PromptInput::text(text);
            prompt.agent = agent;
            client.prompt_async(&id, &prompt).await?;
            Ok(None)
        }
        Effect::Command {
            session,
            name,
            arguments,
            agent,
        } => {
            let id = session_for(client, session, sender).await?;
            client
                .command(&id, &name, &arguments, agent.as_deref())
                .await?;
            Ok(None)
        }
        Effect::Load(id) => {
            let (session, messages, children) = tokio::try_join!(
                client.session(&id),
                client.messages(&id),
                client.children(&id)
            )?;
            Ok(Some(Done::Loaded(Box::new(session), messages, children)))
        }
        Effect::Abort(id) => client.abort(&id).await.map(|()| None),
        Effect::Compact(id) => client.summarize(&id).await.map(|()| None),
        Effect::Undo(id) => {
            let (session, messages) = tokio::try_join!(client.session(&id), client.messages(&id))?;
            // Each undo steps one prompt further back from where the last one left.
            let end = session
                .revert
                .as_ref()
                .and_then(|r| messages.iter().position(|m| *m.info.id() == r.message_id))
                .unwrap_or(messages.len());
            let last_user = messages[..end]
                .iter()
                .rev()
                .find(|m| matches!(m.info.as_ref(), Message::User(_)));
            match last_user {
                Some(m) => client
                    .revert(&id, m.info.id().as_str())
                    .await
                    .map(|()| None),
                None => Ok(Some(Done::Failed("nothing to undo".into()))),
            }
        }
        Effect::Redo(id) => {
            let (session, messages) = tokio::try_join!(client.session(&id), client.messages(&id))?;
            let Some(revert) = session.revert else {
                return Ok(Some(Done::Failed("nothing to redo".into())));
            };
            // Each redo brings one prompt back; the last brings back everything.
            let next_user = messages
                .iter()
                .skip_while(|m| *m.info.id() != revert.message_id)
                .skip(1)
                .find(|m| matches!(m.info.as_ref(), Message::User(_)));
            match next_user {
                Some(m) => client.revert(&id, m.info.id().as_str()).await,
                None => client.unrevert(&id).await,
            }
            .map(|()| None)
        }
        Effect::Reply(id, reply) => client.reply(&id, reply).await.map(|()| None),
        Effect::AnswerQuestion(id, answers) => {
            client.answer_question(&id, &answers).await.map(|()| None)
        }
        Effect::DismissQuestion(id) => client.dismiss_question(&id).await.map(|()| None),
        Effect::ListSessions => Ok(Some(Done::Sessions(client.sessions().await?))),
        Effect::FindFiles(query) => {
            let found = client.find_files(&query).await.unwrap_or_default();
            Ok(Some(Done::Files(query, found)))
        }
    }
}

/// Takes an answer into the TUI's state; answers what to do next.
pub fn apply(app: &mut App, done: Done) -> Vec<Effect> {
    match done {
        Done::Created(session) => {
            let id = session.id.to_string();
            app.mirror.put_session(*session);
            app.mirror.put_messages(&id, Vec::new());
            app.open(id)
        }
        Done::Loaded(session, messages, children) => {
            let id = session.id.to_string();
            app.mirror.put_session(*session);
            for child in children {
                app.mirror.put_session(child);
            }
            app.mirror.put_messages(&id, messages);
            Vec::new()
        }
        Done::Sessions(sessions) => {
            for session in sessions {
                app.mirror.put_session(session);
            }
            Vec::new()
        }
        Done::Files(..) => Vec::new(),
        Done::Failed(message) => {
            app.notify(message);
            Vec::new()
        }
    }
}
