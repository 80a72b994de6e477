// The ES module face of index.cjs. Only where the SDK's `ToolError` comes from differs: the tool
// runner of an ES module program checks errors against the ES module class, which the CommonJS
// class would not pass (`instanceof`).
import core from './index.cjs';

// The error classes, as index.cjs exports them (node reads its names); MnemoClient is below.
export * from './index.cjs';

export class MnemoClient extends core.MnemoClient {
  static async sdkToolError() {
    return (await import('@anthropic-ai/sdk/lib/tools/ToolError')).ToolError;
  }
}
