// Reads one answer of POST /sessions/{id}/chat with the AI SDK's own client:
// DefaultChatTransport sends the request, readUIMessageStream assembles the
// UI message from the stream. Prints {message, snapshots, error} as JSON.
//
//   node chat_client.mjs BASE_URL SESSION_ID API_KEY MESSAGE_ID TEXT
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [base, sessionId, apiKey, messageId, text] = process.argv.slice(2);
const transport = new DefaultChatTransport({
  api: `${base}/sessions/${sessionId}/chat`,
  headers: { Authorization: `Bearer ${apiKey}` },
});
const stream = await transport.sendMessages({
  chatId: sessionId,
  messages: [{ id: messageId, role: "user", parts: [{ type: "text", text }] }],
  abortSignal: undefined,
  trigger: "submit-message",
  messageId: undefined,
});
let message = null;
let snapshots = 0;
let error = null;
for await (const snapshot of readUIMessageStream({
  stream,
  onError: (err) => { error = String(err); },
  terminateOnError: true,
})) {
  message = snapshot;
  snapshots += 1;
}
console.log(JSON.stringify({ message, snapshots, error }));
