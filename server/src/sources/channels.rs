//! The notifier's ways out: e-mail through the site's SMTP relay (lettre) and incoming webhooks (a
//! JSON body POSTed over HTTP, as Slack and Mattermost take them). The only code that speaks SMTP.

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

/// Why a message did not go out; the text is stored with the delivery (no secrets in it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ChannelError(pub String);

/// E-mail through one relay, from one sender.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl Mailer {
    /// `url` as lettre reads it (`smtp://relay:25`, `smtp://relay:587?tls=required`,
    /// `smtps://user:password@relay:465`); each message gives up after `timeout`.
    pub fn new(url: &str, from: &str, timeout: Duration) -> Result<Self, ChannelError> {
        let from: Mailbox = from.parse().map_err(|e| ChannelError(format!("[notify] from {from:?}: {e}")))?;
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| ChannelError(format!("[notify] smtp_url: {e}")))?
            .timeout(Some(timeout))
            .build();
        Ok(Self { transport, from })
    }

    /// Sends one plain-text message to `to`.
    pub async fn send(&self, to: &str, subject: &str, body: &str) -> Result<(), ChannelError> {
        let to: Mailbox = to.parse().map_err(|e| ChannelError(format!("address {to:?}: {e}")))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body.to_string())
            .map_err(|e| ChannelError(format!("building the message: {e}")))?;
        self.transport.send(message).await.map(drop).map_err(|e| ChannelError(format!("SMTP: {e}")))
    }
}

/// Incoming webhooks.
#[derive(Clone)]
pub struct Webhooks {
    client: reqwest::Client,
}

impl Webhooks {
    pub fn new(timeout: Duration) -> Result<Self, ChannelError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ChannelError(e.to_string()))?;
        Ok(Self { client })
    }

    /// POSTs `payload` to `url`; any answer but 2xx is a failure. The URL (which often holds the
    /// webhook's secret) is never put in the error.
    pub async fn post(&self, url: &str, payload: &serde_json::Value) -> Result<(), ChannelError> {
        let response = self
            .client
            .post(url)
            .json(payload)
            .send()
            .await
            .map_err(|e| ChannelError(format!("webhook unreachable: {}", e.without_url())))?;
        let status = response.status();
        if status.is_success() { Ok(()) } else { Err(ChannelError(format!("webhook answered {status}"))) }
    }
}
