// Preloaded (node --import) by e2e tests into example servers that listen
// on every interface with listen(port): it makes a listen given only a port
// listen on 127.0.0.1, so that a test never opens a port beyond loopback.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === 'number' || (typeof port === 'string' && /^\d+$/.test(port))) && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
