#!/usr/bin/perl

# R-CONF-2: an https provider whose host names an upstream {} block: the
# attempt uses that block (keepalive), sends the provider's host as Host
# and as the TLS SNI name.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $d = $t->dir;

OmniTest::need(system("openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
                      . "-subj '/CN=provider.test' -keyout $d/provider.key "
                      . "-out $d/provider.crt >/dev/null 2>&1") == 0,
               'openssl cannot make a certificate');

$t->write_file('key', "sk-tls\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    upstream provider.test {
        server 127.0.0.1:%%PORT_tls%%;
        keepalive 8;
    }

    omniroute_provider secure url=https://provider.test/api/v1;
    omniroute_connection s1 provider=secure key_file=%%TESTDIR%%/key;

    %%GATEWAY%%

    # the provider: answers with what it saw
    server {
        listen 127.0.0.1:%%PORT_tls%% ssl;
        ssl_certificate %%TESTDIR%%/provider.crt;
        ssl_certificate_key %%TESTDIR%%/provider.key;
        default_type application/json;

        location / {
            return 200 '{"sni":"$ssl_server_name","host":"$http_host","uri":"$request_uri","auth":"$http_authorization","len":"$content_length"}';
        }
    }
EOF

$t->run($t->port('gw'));

my $r = $t->post($t->port('gw'), '/v1/chat/completions',
                 '{"model":"secure/gpt"}');
is($r->{status}, 200, 'an https provider through an upstream block');

my $seen = OmniTest::json($r) || {};
is($seen->{sni}, 'provider.test', 'TLS SNI is the provider host');
is($seen->{host}, 'provider.test', 'Host is the provider host');
is($seen->{uri}, '/api/v1/chat/completions', 'the provider path prefix');
is($seen->{auth}, 'Bearer sk-tls', 'the connection credential');
is($seen->{len}, length('{"model":"gpt"}'), 'the rewritten body length');

$t->done;
done_testing;
