//! Frames on a byte stream: one message written and flushed as one frame, and one frame read
//! with its length checked before anything is allocated for it.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{Message, ProtocolError, READ_STEP_BYTES, frame_length};

/// Writes one message as one frame and flushes, so a keepalive or a refusal is not left in a
/// buffer. A message over the limits is refused before anything is written.
pub async fn write_message<W: AsyncWrite + Unpin>(w: &mut W, msg: &Message) -> Result<(), ProtocolError> {
    msg.check_limits()?;
    w.write_all(&msg.encode()).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame and decodes it. `Ok(None)` is a clean end of stream, between frames; an end
/// of stream inside a frame (even inside its length) is [`ProtocolError::UnexpectedEof`].
///
/// The length is checked before anything is allocated, and the buffer then grows only as the
/// frame's bytes arrive. Cancel-safety: none; a read abandoned mid-frame loses the stream's
/// framing, so drop the connection.
pub async fn read_message<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Message>, ProtocolError> {
    let mut header = [0u8; 4];
    let mut filled = 0;
    while filled < header.len() {
        let n = r.read(&mut header[filled..]).await?;
        if n == 0 {
            if filled == 0 {
                return Ok(None);
            }
            return Err(ProtocolError::UnexpectedEof { part: "length", read: filled, expected: header.len() });
        }
        filled += n;
    }
    let length = frame_length(header)?;
    let mut frame: Vec<u8> = Vec::new();
    while frame.len() < length {
        if frame.len() == frame.capacity() {
            let target = length.min(frame.capacity().saturating_mul(2).max(READ_STEP_BYTES));
            frame.reserve_exact(target - frame.len());
        }
        let remaining = (length - frame.len()) as u64;
        let n = (&mut *r).take(remaining).read_buf(&mut frame).await?;
        if n == 0 {
            return Err(ProtocolError::UnexpectedEof {
                part: "frame type and payload",
                read: frame.len(),
                expected: length,
            });
        }
    }
    Message::decode_frame(frame[0], &frame[1..]).map(Some)
}
