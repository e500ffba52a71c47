// Helpers of the e2e scripts in this directory.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// until polls cond every 10 ms for at most ms milliseconds.
export async function until(cond, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

// closeAndWait closes client and returns once child, the process its stdio
// transport started, has exited (at once if it exited before).
export async function closeAndWait(client, child) {
  const exited = new Promise((resolve) => {
    if (child.exitCode !== null) resolve();
    else child.once('exit', resolve);
  });
  await client.close();
  await exited;
}

// textOf is the text of a tools/call result's one text block, else null.
export function textOf(result) {
  return result?.content?.length === 1 && result.content[0].type === 'text' ? result.content[0].text : null;
}
