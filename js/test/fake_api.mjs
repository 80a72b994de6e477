// A fake Messages API on loopback for the tool-runner tests: each POST /v1/messages is answered
// with the next scripted assistant turn, and the request bodies are kept, so a test reads the
// tool_result blocks the SDK's tool runner sent back.
import http from 'node:http';

/** Starts the fake; `turns` are the assistant messages' `content` arrays, in order. */
export async function fakeMessagesApi(turns) {
  const requests = [];
  let next = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url.startsWith('/v1/messages')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: req.url } }));
        return;
      }
      requests.push(JSON.parse(body));
      const content = turns[Math.min(next, turns.length - 1)];
      next += 1;
      const toolUse = content.some((block) => block.type === 'tool_use');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `msg_${next}`,
          type: 'message',
          role: 'assistant',
          model: 'claude-opus-4-8',
          content,
          stop_reason: toolUse ? 'tool_use' : 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: 1, output_tokens: 1 },
        }),
      );
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    /** Every tool_result block the runner sent, in order. */
    toolResults: () =>
      requests.flatMap((r) =>
        r.messages.flatMap((m) => (m.role === 'user' && Array.isArray(m.content) ? m.content : [])).filter((b) => b.type === 'tool_result'),
      ),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** A `tool_use` block of the memory tool. */
export function memoryUse(id, input) {
  return { type: 'tool_use', id, name: 'memory', input };
}

/** The tool_result lines `mnemo tool` prints for `blocks` on a fresh store at `db`. */
export async function mnemoToolResults(bin, db, profile, blocks) {
  const { execFileSync } = await import('node:child_process');
  const input = blocks.map((b) => JSON.stringify(b) + '\n').join('');
  const out = execFileSync(bin, ['tool', '--no-start', '--profile', profile, '--db', db], { input, encoding: 'utf-8', stdio: ['pipe', 'pipe', 'ignore'] });
  return out.trim().split('\n').map((line) => JSON.parse(line));
}
