// Drives the shim with the official OpenAI client for Node: completions
// with logprobs and echo, streamed completions with usage, chat
// completions with logprobs, streamed chat, and the model list. Any
// error makes the process exit non-zero.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

function check(cond, what) {
  if (!cond) {
    throw new Error("check failed: " + what);
  }
}

const models = await client.models.list();
const model = models.data[0].id;
check(typeof model === "string" && model.length > 0, "models.list gives an id");

const c = await client.completions.create({
  model, prompt: "the answer is", max_tokens: 4, temperature: 0, logprobs: 3, echo: true,
});
const lp = c.choices[0].logprobs;
check(lp.tokens.length === lp.token_logprobs.length && lp.tokens.length === lp.text_offset.length, "parallel logprob arrays");
check(lp.token_logprobs[0] === null && typeof lp.token_logprobs[1] === "number", "echo row 0 null, row 1 a number");
check(c.usage.prompt_tokens > 0 && c.usage.prompt_tokens_details.cached_tokens >= 0, "usage with cached tokens");

let text = "", rows = 0, usage = null;
const stream = await client.completions.create({
  model, prompt: "hello world", max_tokens: 6, temperature: 0, logprobs: 1, stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    text += ch.text;
    if (ch.logprobs) rows += ch.logprobs.tokens.length;
  }
}
check(rows > 0 && usage && usage.completion_tokens > 0, "streamed completion rows and usage");

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "what is the capital of france" }],
  max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2,
});
const content = chat.choices[0].logprobs.content;
check(content.length > 0 && content.every((t) => t.top_logprobs.length === 2), "chat logprobs with two alternatives");

let chatText = "";
const chatStream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "hello" }], max_tokens: 4, stream: true,
});
for await (const chunk of chatStream) {
  for (const ch of chunk.choices) chatText += ch.delta?.content ?? "";
}

console.log(JSON.stringify({ model, completion: c.choices[0].text, streamed: text, rows, chat: chat.choices[0].message.content, chatStreamed: chatText }));
