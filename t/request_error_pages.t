#!/usr/bin/perl

# nginx's own error pages are JSON in the OpenAI shape in omniroute_pass
# and omniroute_api locations (a denied address: 403) and in their servers
# before a location is chosen (a malformed request: 400; headers too
# large, nginx's 494, answered with status 400); another server keeps its
# HTML; a 405 carries Allow.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key', "sk-1\n");

$t->config(<<'EOF');
    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key;

    server {
        listen 127.0.0.1:%%PORT_gw%%;
        large_client_header_buffers 2 1k;

        location /v1/ {
            omniroute_pass;
        }

        location /denied/ {
            deny all;
            omniroute_pass;
        }

        location /ops/ {
            deny all;
            omniroute_api prefix=/ops;
            omniroute_api_token off;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_api%%;
        large_client_header_buffers 2 1k;

        location /api/ {
            omniroute_api;
            omniroute_api_token off;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_web%%;
        large_client_header_buffers 2 1k;

        location / {
            return 200 "web\n";
        }
    }
EOF

$t->run($t->port('gw'), $t->port('api'), $t->port('web'));

my ($gw, $api, $web) = map { $t->port($_) } qw(gw api web);

sub json_error {
    my ($r, $status, $code, $name) = @_;

    is($r->{status}, $status, "$name: $status");
    like($r->{headers}{'content-type'} // '', qr{^application/json},
         "$name: JSON");
    my $doc = eval { decode_json($r->{body}) };
    is($doc && $doc->{error}{code}, $code, "$name: code $code")
        or diag($r->{raw});
    ok($doc && $doc->{error}{message} && $doc->{error}{type},
       "$name: message and type");
    return $doc;
}

my $r = $t->post($gw, '/denied/chat/completions', { model => 'p/m' });
my $doc = json_error($r, 403, 'forbidden', 'deny all in a gateway location');
is($doc->{error}{type}, 'permission_error', 'a permission_error');

$r = $t->get($gw, '/ops/api/monitoring/health');
json_error($r, 403, 'forbidden', 'deny all in an API location');

$r = $t->http($gw, "GET /v1/models HTTP/1.1\r\nHost: bad/host\r\n"
                   . "Connection: close\r\n\r\n");
json_error($r, 400, 'bad_request', 'a malformed request to the gateway server');

$r = $t->http($api, "GET /api/x HTTP/1.1\r\nHost: bad/host\r\n"
                    . "Connection: close\r\n\r\n");
json_error($r, 400, 'bad_request', 'a malformed request to an API server');

my $big = 'x' x 1500;
$r = $t->http($gw, "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n"
                   . "X-Big: $big\r\nContent-Length: 2\r\n"
                   . "Connection: close\r\n\r\n{}");
$doc = json_error($r, 400, 'headers_too_large',
                  'a header line too large (494)');
like($doc->{error}{message}, qr/headers are too large/, 'saying so');

$r = $t->http($api, "GET /api/x HTTP/1.1\r\nHost: a\r\nX-Big: $big\r\n"
                    . "Connection: close\r\n\r\n");
json_error($r, 400, 'headers_too_large', 'the same to an API server');

$r = $t->get($gw, '/favicon.ico');
json_error($r, 404, 'not_found', 'no location in the gateway server');

# another server keeps nginx's pages
$r = $t->http($web, "GET / HTTP/1.1\r\nHost: bad/host\r\nConnection: close\r\n\r\n");
is($r->{status}, 400, 'a malformed request elsewhere: 400');
like($r->{headers}{'content-type'} // '', qr{^text/html},
     'with nginx\'s HTML page');

$r = $t->get($gw, '/v1/chat/completions');
json_error($r, 405, 'method_not_allowed', 'GET on the gateway');
is($r->{headers}{allow}, 'POST', 'with Allow');

is(scalar @{$m->requests}, 0, 'no provider was asked');

$t->done;

done_testing;
