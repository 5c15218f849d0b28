require('node:http')
  .createServer((req, res) => {
    let b = '';
    req.on('data', (d) => (b += d));
    req.on('end', () => {
      console.log('upstream got', req.method, req.url, 'body', JSON.stringify(b), 'headers', JSON.stringify(req.headers));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ echo: b }));
    });
  })
  .listen(18090, () => console.log('upstream up'));
