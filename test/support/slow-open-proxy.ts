import { createConnection, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a database server that holds back the first bytes of every new
 * connection for `delayMs`: opening a connection then takes at least that long, as it does on a
 * loaded machine or a distant server, while statements on an open connection pass at full speed.
 */
export class SlowOpenProxy {
  private readonly sockets = new Set<Socket>();
  private readonly server = createServer((client) => this.forward(client));
  /** Connections opened through the proxy so far. */
  opened = 0;

  private constructor(
    private readonly target: { host: string; port: number },
    private readonly delayMs: number,
  ) {}

  static async start(target: { host: string; port: number }, delayMs: number): Promise<SlowOpenProxy> {
    const proxy = new SlowOpenProxy(target, delayMs);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    return typeof address === 'object' && address ? address.port : 0;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(client: Socket): void {
    this.opened++;
    const upstream = createConnection(this.target);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    // Nothing flows either way until the delay has passed, so the handshake takes that much longer, once.
    client.pause();
    upstream.pause();
    setTimeout(() => {
      client.pipe(upstream);
      upstream.pipe(client);
    }, this.delayMs);
  }
}
