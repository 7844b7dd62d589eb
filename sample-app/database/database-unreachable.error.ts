import { serverOptions } from '../config/sample-config.js';
import { type DatabaseKind, kindOfUrl } from './database-kind.js';

/** The server did not answer, or refused us: the one startup failure users can fix themselves. */
export class DatabaseUnreachableError extends Error {
  override name = 'DatabaseUnreachableError';

  constructor(
    readonly url: URL,
    cause: Error,
  ) {
    const { host, port, user } = serverOptions(url);
    super(`Cannot connect to a ${SERVERS[kindOfUrl(url)].name} server at ${host}:${port} as '${user}': ${cause.message}`, { cause });
  }

  /** What to type to get a database, for the npm script the user ran (`sample` or `demo`). */
  help(script: string): string {
    const server = SERVERS[kindOfUrl(this.url)];
    const dockerUrl = new URL(this.url.href);
    dockerUrl.username = server.docker.user;
    dockerUrl.password = server.docker.password;
    dockerUrl.hostname = '127.0.0.1';
    dockerUrl.port = server.docker.port;
    const code = String((this.cause as { code?: unknown }).code);
    const refused = ACCESS_DENIED.has(code);
    return [
      this.message,
      ...(refused ? ['A server answers there but refused these credentials: fix user:password in DB_LOCK_SAMPLE_URL, or use Docker.'] : []),
      '',
      `Start ${server.docker.what} with Docker, from the repository root (give it ~10 s; \`docker compose ps\` shows it healthy):`,
      `  docker compose up -d ${server.docker.service}`,
      'then run again against it:',
      `  DB_LOCK_SAMPLE_URL=${dockerUrl.href} npm run ${script}`,
      '',
      `Or point DB_LOCK_SAMPLE_URL at a server you already run: ${server.urlShape}`,
    ].join('\n');
  }
}

/** Per kind of server: its name in messages, and the docker-compose.yml service that provides one. */
const SERVERS: Readonly<
  Record<DatabaseKind, { name: string; urlShape: string; docker: { service: string; what: string; user: string; password: string; port: string } }>
> = {
  // docker-compose.yml maps the mariadb service to 3308 (mysql: 3307)
  mysql: {
    name: 'MySQL/MariaDB',
    urlShape: 'mysql://user:password@host:port/database',
    docker: { service: 'mariadb', what: 'MariaDB', user: 'root', password: 'root', port: '3308' },
  },
  // 5433, so that it never clashes with a PostgreSQL already listening on 5432
  postgres: {
    name: 'PostgreSQL',
    urlShape: 'postgres://user:password@host:port/database',
    docker: { service: 'postgres', what: 'PostgreSQL', user: 'postgres', password: 'postgres', port: '5433' },
  },
};

/** Node's network errors (both drivers), mysql2's and PostgreSQL's refusals of the credentials. */
const NETWORK_FAILURES = ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH'];
const ACCESS_DENIED = new Set([
  'ER_ACCESS_DENIED_ERROR',
  'ER_ACCESS_DENIED_NO_PASSWORD_ERROR',
  '28P01', // PostgreSQL: invalid_password
  '28000', // PostgreSQL: invalid_authorization_specification (no such role, no pg_hba.conf entry)
]);
const CONNECTION_FAILURES = new Set([...NETWORK_FAILURES, ...ACCESS_DENIED]);

export function isConnectionFailure(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string') return CONNECTION_FAILURES.has(code);
  // pg reports a socket that closed or timed out before the server answered with no code at all:
  // 'Connection terminated unexpectedly', 'Connection terminated due to connection timeout'.
  return typeof message === 'string' && message.startsWith('Connection terminated');
}
