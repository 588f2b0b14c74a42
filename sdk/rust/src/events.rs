//! The event stream: every change to jobs, evaluations, allocations,
//! deployments and nodes, resumed from the last index seen when a gateway
//! goes away.

use std::collections::VecDeque;
use std::pin::Pin;

use caravan_proto::event_service_client::EventServiceClient;
use caravan_proto::{Event, EventBatch, EventStreamRequest};
use futures::Stream;
use tonic::{Code, Streaming};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{GrpcChannel, MAX_MESSAGE_BYTES};

fn service(ch: GrpcChannel) -> EventServiceClient<GrpcChannel> {
    EventServiceClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The events of a subscription, in index order; ends after yielding an
/// error.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event>> + Send>>;

/// The event calls of a [`Client`]: [`Client::events`].
#[derive(Debug, Clone, Copy)]
pub struct Events<'a> {
    client: &'a Client,
}

impl<'a> Events<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Events { client }
    }

    /// Subscribes to `topics` from now on: `"Job"`, `"Job:<id>"`,
    /// `"Evaluation"`, `"Allocation"`, `"Deployment"`, `"Node"` (`"*"` for any
    /// topic or key; none means every topic), in the client's namespace.
    /// Returns once the gateway has taken the subscription, so a change made
    /// after it is seen. Heartbeats are not yielded.
    ///
    /// ```no_run
    /// # async fn demo(client: caravan_client::Client) -> caravan_client::Result<()> {
    /// use futures::StreamExt;
    /// let mut events = client.events().stream(["Job:web", "Allocation"]).await?;
    /// while let Some(event) = events.next().await {
    ///     let event = event?;
    ///     println!("{} {} {} @{}", event.topic, event.r#type, event.key, event.index);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As any read, when no gateway takes the subscription.
    pub async fn stream<I, S>(&self, topics: I) -> Result<EventStream>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.stream_from(topics, 0).await
    }

    /// As [`Events::stream`], resuming after revision `index` (an event's
    /// `index`; 0 starts from now).
    ///
    /// # Errors
    ///
    /// As any read, when no gateway takes the subscription.
    pub async fn stream_from<I, S>(&self, topics: I, index: i64) -> Result<EventStream>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let request = EventStreamRequest {
            topics: topics.into_iter().map(Into::into).collect(),
            namespace: self.client.namespace().to_string(),
            index,
        };
        let open = subscribe(self.client, &request).await?;
        let feed = Feed {
            client: self.client.clone(),
            request,
            open: Some(open),
            pending: VecDeque::new(),
            breaks: 0,
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(feed, Feed::next)))
    }
}

async fn subscribe(client: &Client, request: &EventStreamRequest) -> Result<Streaming<EventBatch>> {
    client
        .read(request.clone(), |ch, r| async move {
            service(ch).stream(r).await
        })
        .await
}

/// One subscription's state between the events it yields.
struct Feed {
    client: Client,
    /// The subscription, its `index` the last revision seen.
    request: EventStreamRequest,
    open: Option<Streaming<EventBatch>>,
    pending: VecDeque<Event>,
    /// Streams lost in a row without a batch between them.
    breaks: u32,
    done: bool,
}

impl Feed {
    async fn next(mut self) -> Option<(Result<Event>, Feed)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            let stream = match self.open.as_mut() {
                Some(stream) => stream,
                None => match self.reopen().await {
                    Ok(()) => continue,
                    Err(err) => return Some((Err(err), self.finished())),
                },
            };
            match stream.message().await {
                Ok(Some(batch)) => {
                    self.breaks = 0;
                    if batch.heartbeat {
                        continue;
                    }
                    self.request.index = self.request.index.max(batch.index);
                    self.pending.extend(batch.events);
                }
                // The gateway went away (it stops streams when it shuts
                // down): resume on the next one from the last index seen.
                Ok(None) => self.open = None,
                Err(status) if status.code() == Code::Unavailable => self.open = None,
                Err(status) => {
                    let err = Error::from_status(&status, self.client.address());
                    return Some((Err(err), self.finished()));
                }
            }
        }
    }

    /// Subscribes again after a lost stream, pausing as the retry policy
    /// does between rounds so a gateway that keeps closing is not spun on.
    async fn reopen(&mut self) -> Result<()> {
        let policy = self.client.retry_policy();
        if self.breaks >= policy.rounds {
            return Err(Error::Unavailable {
                message: format!(
                    "event stream lost {} times in a row without an event",
                    self.breaks
                ),
                leader: None,
            });
        }
        tokio::time::sleep(policy.backoff(self.breaks)).await;
        self.breaks += 1;
        self.open = Some(subscribe(&self.client, &self.request).await?);
        Ok(())
    }

    fn finished(mut self) -> Feed {
        self.done = true;
        self.open = None;
        self
    }
}
